/**
 * `fit all --chip h200` (issue 17 goals: ≤ 1.9 s whole process, peak memory ≤ 150 MiB, bootstrap
 * included). First the whole process: one fresh `node bin/stepcal.mjs fit all --chip h200 --check`
 * (reading, every family, the gates, rendering and comparing the outputs; dist/ when fresh), its
 * wall time, its own CPU time (user + system: the comparable figure on the shared 2-core machine)
 * and its peak resident set (`process.resourceUsage().maxRSS`, printed by a preloaded exit hook).
 * Then `fitAll` in this process, with CPU and wall time per family. Bootstraps run on envelope
 * points (GEMM ramp), on per-(n,k) cells clustered by whole k (shape halves) and on ≤ 3000-row
 * resamples (attention, HBM); see docs/fitting.md. Prints figures; never fails.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fitAll } from '../src/fit/index.ts';

const GOAL_S = 1.9;
const GOAL_MIB = 150;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Preloaded into the child: its CPU µs and peak RSS (KiB) on fd 2 at exit. */
const HOOK = `data:text/javascript,process.on('exit',()=>{const c=process.cpuUsage();process.stderr.write('\\ncpu_us='+(c.user+c.system)+' maxrss_kib='+process.resourceUsage().maxRSS+'\\n')})`;

/**
 * One whole `fit all --chip h200 --check` process: wall s, CPU s, peak MiB and its last stderr line.
 * `workers` sets STEPCAL_FIT_WORKERS (undefined: the default, one thread under 4 cores, else min(cores, 4)
 * workers; `beside`: one worker beside the main thread; src/fit/parallel.ts).
 */
function wholeProcess(workers?: number | 'beside') {
  const t0 = performance.now();
  const r = spawnSync(
    process.execPath,
    ['--import', HOOK, path.join(root, 'bin', 'stepcal.mjs'), 'fit', 'all', '--chip', 'h200', '--check'],
    {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, STEPCAL_QUIET: '0', STEPCAL_FIT_WORKERS: workers === undefined ? '' : String(workers) },
    },
  );
  const wall_s = (performance.now() - t0) / 1000;
  const cpu_s = Number(/cpu_us=(\d+)/.exec(r.stderr)?.[1] ?? Number.NaN) / 1e6;
  const peak_mib = Number(/maxrss_kib=(\d+)/.exec(r.stderr)?.[1] ?? Number.NaN) / 1024;
  const check = /fit --check h200: [^\n]*/.exec(r.stderr)?.[0] ?? `exit ${r.status}`;
  return { wall_s, cpu_s, peak_mib, check };
}

/** Issue 13's new families (its "Numbers to reach": together they add ≤ 1.0 s to `fit all` on h200). */
const ISSUE13_FAMILIES = ['moe_experts', 'mla', 'expert_alltoall'] as const;
const ISSUE13_GOAL_S = 1.0;

/**
 * The issue 13 line: each new family's wall ms (`fitAll`'s timings_ms: moe_experts on the moe rows already read,
 * mla and expert_alltoall reading their own tables) and their sum beside the 1.0 s goal.
 */
function issue13Line(timings_ms: Readonly<Record<string, number>>): string {
  const parts = ISSUE13_FAMILIES.map((f) => ({ f, ms: timings_ms[f] ?? 0 }));
  const added_s = parts.reduce((s, p) => s + p.ms, 0) / 1000;
  return (
    `issue 13 families: ${parts.map((p) => `${p.f} ${p.ms.toFixed(0)} ms`).join(' + ')} = ${added_s.toFixed(2)} s added ` +
    `(incl. reading their tables); goal ≤ ${ISSUE13_GOAL_S.toFixed(1)} s; ratio ${(added_s / ISSUE13_GOAL_S).toFixed(2)}\n`
  );
}

export default async function bench(): Promise<void> {
  const w = wholeProcess();
  process.stdout.write(
    `fit all --chip h200 --check, whole process: ${w.wall_s.toFixed(1)} s wall, ${w.cpu_s.toFixed(1)} s CPU; goal ${GOAL_S} s (ratio ${(w.wall_s / GOAL_S).toFixed(2)} wall, ${(w.cpu_s / GOAL_S).toFixed(2)} CPU; ≤ 1 meets it) [${w.check}]\n` +
      `  peak memory ${w.peak_mib.toFixed(0)} MiB; goal ${GOAL_MIB} MiB (ratio ${(w.peak_mib / GOAL_MIB).toFixed(2)})\n`,
  );
  // The same with one worker beside the main thread (STEPCAL_FIT_WORKERS=beside) and on two worker threads (=2).
  for (const workers of ['beside', 2] as const) {
    const o = wholeProcess(workers);
    process.stdout.write(
      `  ${workers === 'beside' ? 'one worker beside the main thread' : 'on two workers'} (STEPCAL_FIT_WORKERS=${workers}): ${o.wall_s.toFixed(1)} s wall, ${o.cpu_s.toFixed(1)} s CPU, peak ${o.peak_mib.toFixed(0)} MiB [${o.check}]\n`,
    );
  }
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const cpu_ms: Record<string, number> = {};
  let mark = cpu();
  const t0 = performance.now();
  // In this thread (workers: 1): process.cpuUsage() counts every thread, so per-family CPU needs one
  // family at a time. Each family reads its own tables inside its time (src/fit/families.ts).
  const r = await fitAll('h200', {
    workers: 1,
    onFamily: (family, phase) => {
      const now = cpu();
      // CPU before a family starts is its reading (and any lazy table read); after, its fit.
      cpu_ms[phase === 'start' ? `${family} (read)` : family] = now - mark;
      mark = now;
    },
  });
  const total_s = (performance.now() - t0) / 1000;
  for (const [family, ms] of Object.entries(r.timings_ms))
    process.stdout.write(
      `  ${family.padEnd(18)} ${(ms / 1000).toFixed(2)} s wall, ${((cpu_ms[family] ?? 0) / 1000).toFixed(2)} s CPU (+ ${((cpu_ms[`${family} (read)`] ?? 0) / 1000).toFixed(2)} s CPU before it)\n`,
    );
  process.stdout.write(
    `fitAll h200 in-process, one thread (incl. reading measurements): ${total_s.toFixed(1)} s wall\n`,
  );
  process.stdout.write(issue13Line(r.timings_ms));
}
