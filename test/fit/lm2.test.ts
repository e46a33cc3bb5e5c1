/**
 * levenbergMarquardt2 (src/fit/lm2.ts) gives exactly the parameters ml-levenberg-marquardt gives
 * (=== on every coordinate, and the same error) on seeded random two-parameter problems: the GEMM
 * ramp in (eps_max, ln m_half), weighted and not, from near and far starts, and a log-sum model like
 * the shape halves. Each problem is also checked to move from its start (so the iterations ran).
 */
import { levenbergMarquardt } from 'ml-levenberg-marquardt';
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/core/numeric/resample.ts';
import { levenbergMarquardt2, levenbergMarquardt2On, type Lm2Options, type Lm2Problem } from '../../src/fit/lm2.ts';

type P = number[];
const ramp = ([e, u]: P) => {
  const h = Math.exp(u!);
  return (m: number) => (e! * m) / (m + h);
};
const rampJac = ([e, u]: P) => {
  const h = Math.exp(u!);
  return (m: number) => [m / (m + h), (-e! * m * h) / ((m + h) * (m + h))];
};
/** A Jacobian returning an array per point (the library's form) as levenbergMarquardt2 takes it: written into `out`. */
const into = (jac: (p: P) => (x: number) => number[]) => (p: P) => {
  const j = jac(p);
  return (x: number, out: Float64Array) => {
    const v = j(x);
    out[0] = v[0]!;
    out[1] = v[1]!;
  };
};
const logs = ([a, b]: P) => {
  const [ha, hb] = [Math.exp(a!), Math.exp(b!)];
  return (x: number) => Math.log(x / (x + ha)) + Math.log((x % 7) + 1 / ((x % 7) + 1 + hb));
};
const logsJac = ([a, b]: P) => {
  const [ha, hb] = [Math.exp(a!), Math.exp(b!)];
  return (x: number) => [-ha / (x + ha), -hb / ((x % 7) * ((x % 7) + 1 + hb) + 1) / ((x % 7) + 1 + hb)];
};

function both(x: number[], y: number[], model: typeof ramp, jac: typeof rampJac, o: Lm2Options) {
  const mine = levenbergMarquardt2({ x, y }, model, into(jac), o);
  const lib = levenbergMarquardt({ x, y }, model, {
    initialValues: [...o.initialValues],
    ...(o.weights ? { weights: [...o.weights] } : {}),
    jacobianFunction: jac,
    damping: o.damping,
    maxIterations: o.maxIterations,
    errorTolerance: o.errorTolerance,
    improvementThreshold: o.improvementThreshold,
    minValues: [...o.minValues],
    maxValues: [...o.maxValues],
  });
  return { mine, lib };
}

describe('levenbergMarquardt2', () => {
  it('matches the library bit for bit on 300 random GEMM-ramp problems', () => {
    const rand = seededRandom(17);
    let moved = 0;
    for (let t = 0; t < 300; t++) {
      const eps = 0.3 + 0.7 * rand();
      const mh = Math.exp(2 + 6 * rand());
      const n = 3 + Math.floor(rand() * 30);
      const x = Array.from({ length: n }, (_, i) => 2 ** (i % 17) * (1 + (i >> 4)));
      const y = x.map((m) => ((eps * m) / (m + mh)) * (1 + 0.05 * (rand() - 0.5)));
      const weighted = t % 2 === 0;
      const o: Lm2Options = {
        initialValues: [t % 3 === 0 ? Math.max(...y) : 0.5, Math.log(t % 3 === 0 ? 100 : mh * (0.5 + rand()))],
        ...(weighted ? { weights: x.map(() => 1 / Math.sqrt(1 + Math.floor(rand() * 9))) } : {}),
        damping: 1e-3,
        maxIterations: 60,
        errorTolerance: 1e-14,
        improvementThreshold: 1e-6,
        minValues: [1e-6, Math.log(1e-3)],
        maxValues: [10, Math.log(1e7)],
      };
      const { mine, lib } = both(x, y, ramp, rampJac, o);
      expect(mine.parameterValues[0], `problem ${t}`).toBe(lib.parameterValues[0]);
      expect(mine.parameterValues[1], `problem ${t}`).toBe(lib.parameterValues[1]);
      expect(mine.parameterError).toBe(lib.parameterError);
      if (mine.parameterValues[0] !== o.initialValues[0]) moved++;
    }
    expect(moved).toBeGreaterThan(250);
  });

  it('matches the library on a log-sum model with bounds that bind', () => {
    const rand = seededRandom(5);
    for (let t = 0; t < 100; t++) {
      const x = Array.from({ length: 5 + (t % 20) }, (_, i) => 16 * (i + 1));
      const y = x.map((v) => logs([Math.log(50 + 400 * rand()), rand() * 3])(v) + 0.01 * rand());
      const o: Lm2Options = {
        initialValues: [Math.log(256), Math.log(256)],
        weights: x.map((_, i) => 1 / Math.sqrt(1 + (i % 4))),
        damping: 1e-3,
        maxIterations: 60,
        errorTolerance: 1e-14,
        improvementThreshold: 1e-6,
        minValues: [Math.log(1e-3), Math.log(1e-3)],
        maxValues: [Math.log(1e6), t % 4 === 0 ? 1 : Math.log(1e6)],
      };
      const { mine, lib } = both(x, y, logs, logsJac, o);
      expect(mine.parameterValues, `problem ${t}`).toEqual(lib.parameterValues);
      expect(Object.is(mine.parameterValues[0], lib.parameterValues[0])).toBe(true);
      expect(Object.is(mine.parameterValues[1], lib.parameterValues[1])).toBe(true);
    }
  });

  it('levenbergMarquardt2On (the model at every point per call) matches the library on the ramp', () => {
    const rand = seededRandom(23);
    for (let t = 0; t < 100; t++) {
      const n = 3 + Math.floor(rand() * 30);
      const x = Array.from({ length: n }, (_, i) => 2 ** (i % 17) * (1 + (i >> 4)));
      const mh = Math.exp(2 + 6 * rand());
      const y = x.map((m) => ((0.9 * m) / (m + mh)) * (1 + 0.05 * (rand() - 0.5)));
      const problem: Lm2Problem = {
        y,
        values: (e, u, out) => {
          for (let i = 0; i < n; i++) out[i] = ramp([e, u])(x[i]!);
        },
        partials: (e, u, d0, d1) => {
          for (let i = 0; i < n; i++) [d0[i], d1[i]] = rampJac([e, u])(x[i]!) as [number, number];
        },
        pointwise: () => ({ x, model: ramp, jacobian: into(rampJac) }),
      };
      const o: Lm2Options = {
        initialValues: [0.5, Math.log(100)],
        ...(t % 2 ? { weights: x.map(() => 1 / Math.sqrt(1 + Math.floor(rand() * 9))) } : {}),
        damping: 1e-3,
        maxIterations: 60,
        errorTolerance: 1e-14,
        improvementThreshold: 1e-6,
        minValues: [1e-6, Math.log(1e-3)],
        maxValues: [10, Math.log(1e7)],
      };
      const mine = levenbergMarquardt2On(problem, o);
      const { lib } = both(x, y, ramp, rampJac, o);
      expect(Object.is(mine.parameterValues[0], lib.parameterValues[0]), `problem ${t}`).toBe(true);
      expect(Object.is(mine.parameterValues[1], lib.parameterValues[1]), `problem ${t}`).toBe(true);
      expect(mine.parameterError).toBe(lib.parameterError);
    }
  });
});
