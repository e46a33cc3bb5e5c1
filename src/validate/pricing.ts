/**
 * The real pricer behind validation (edge module: loads chip and model files once per deployment).
 * Deployment of a row (with an optional sm_scale, the engine compute-efficiency term): tp from the row, ep 1, weight_dtype / kv_dtype from the row, cudagraph_mode
 * from the row or FULL_AND_PIECEWISE, other fields `defaultDeployment`'s (src/pricer/deployment.ts).
 */
import { loadChip, type Chip } from '../core/catalog/chip.ts';
import { loadModel, type ModelGraph } from '../core/catalog/model.ts';
import { UserError } from '../core/errors.ts';
import { defaultDeployment } from '../pricer/deployment.ts';
import { createPricer, type StepPricer } from '../pricer/pricer.ts';
import { CUDAGRAPH_MODES, type CudagraphMode } from '../pricer/types.ts';
import { resolveCoefficients, type ResolvedCoefficients } from '../registry/load.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import type { PricerKey, ValidationDeps } from './priced.ts';

/** KV heads of a model: the first attention node's n_kv (whole model, before the tp split); 0 = none. */
function kvHeadsOf(m: ModelGraph): number {
  const stack: unknown[] = [m];
  while (stack.length) {
    const x = stack.pop();
    if (Array.isArray(x)) stack.push(...x);
    else if (x && typeof x === 'object') {
      const o = x as Record<string, unknown>;
      if (o.op === 'Attention' && typeof o.n_kv === 'number') return o.n_kv;
      stack.push(...Object.values(o));
    }
  }
  return 0;
}

/** Deps pricing rows with `createPricer` on the given registry sets. */
export function defaultValidationDeps(registry: CoefficientSet[]): ValidationDeps {
  const chips = new Map<string, Chip>();
  const models = new Map<string, ModelGraph>();
  const pricers = new Map<string, StepPricer>();
  const regs = new Map<string, ResolvedCoefficients>();
  /** sm_scale ≠ 1 (the CMOverlap engine-term search) builds a fresh pricer each call, uncached. */
  const get = (key: PricerKey, opts: { sm_scale?: number } = {}): StepPricer => {
    const scale = opts.sm_scale ?? 1;
    const ks = JSON.stringify(key);
    let p = scale === 1 ? pricers.get(ks) : undefined;
    if (p) return p;
    let chip = chips.get(key.chip);
    if (!chip) {
      chip = loadChip(key.chip);
      chips.set(key.chip, chip);
    }
    let model = models.get(key.model);
    if (!model) {
      model = loadModel(key.model);
      models.set(key.model, model);
    }
    const mode = key.cudagraph_mode === '' ? 'FULL_AND_PIECEWISE' : key.cudagraph_mode;
    if (!(CUDAGRAPH_MODES as readonly string[]).includes(mode)) {
      throw new UserError(`unknown cudagraph_mode "${mode}" (known: ${CUDAGRAPH_MODES.join(', ')})`);
    }
    const deployment = defaultDeployment({
      tp: key.tp,
      weight_dtype: key.weight_dtype,
      ...(key.kv_dtype ? { kv_dtype: key.kv_dtype } : {}),
      cudagraph_mode: mode as CudagraphMode,
    });
    let reg = regs.get(ks);
    if (!reg) {
      reg = resolveCoefficients(registry, {
        hardware: key.chip,
        model: key.model,
        tp: key.tp,
        ep: 1,
        nodes_spanned: Math.ceil(key.tp / chip.gpus_per_node),
      });
      regs.set(ks, reg);
    }
    p = createPricer(chip, model, deployment, reg, scale === 1 ? {} : { sm_scale: scale });
    if (scale === 1) pricers.set(ks, p);
    return p;
  };
  return {
    pricerFor: get,
    kvFacts: (key) => ({
      kv_bytes_per_token_per_rank: get(key).info.kv_bytes_per_token_per_rank,
      kv_heads_per_gpu: Math.max(1, kvHeadsOf(models.get(key.model) ?? loadModel(key.model)) / key.tp),
    }),
    kernelsPerStep: (key, hasPrefill) => {
      const info = get(key).info;
      return hasPrefill ? info.kernels_with_prefill : info.kernels_decode_only;
    },
    collectiveBytesPerToken: (key) => get(key).info.collective_message_bytes_per_token,
  };
}

/**
 * Deps pricing rows of several chips, each with its own registry sets (a row's chip selects them).
 * @throws UserError when a row's chip has no registry given
 */
export function multiChipValidationDeps(byChip: Readonly<Record<string, CoefficientSet[]>>): ValidationDeps {
  const deps = new Map(Object.entries(byChip).map(([c, sets]) => [c, defaultValidationDeps(sets)]));
  const of = (chip: string): ValidationDeps => {
    const d = deps.get(chip);
    if (!d) throw new UserError(`no registry for chip ${chip} (known: ${[...deps.keys()].join(', ')})`);
    return d;
  };
  return {
    pricerFor: (key, opts) => of(key.chip).pricerFor(key, opts),
    kernelsPerStep: (key, hasPrefill) => of(key.chip).kernelsPerStep!(key, hasPrefill),
    kvFacts: (key) => of(key.chip).kvFacts!(key),
    collectiveBytesPerToken: (key) => of(key.chip).collectiveBytesPerToken!(key),
  };
}
