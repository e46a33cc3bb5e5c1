/**
 * Every CLI command, in help order: its name, its line in `stepcal --help` (`term`, `summary`) and a
 * loader for its module (each exports `register(program)`). `stepcal <command>` loads only that
 * command's module, and `stepcal --help` none (start-up, issue 17); test/measurements/cli.test.ts
 * checks that the help drawn from this table equals the help of the loaded commands, so a changed
 * description or argument fails there until this table follows.
 */
import type { Command } from 'commander';

/** One command: what the top-level help shows, and how to load the module that registers it. */
export interface CommandEntry {
  name: string;
  /** The command's term in the top-level help (commander's `subcommandTerm`). */
  term: string;
  /** Its description. */
  summary: string;
  load: () => Promise<{ register: (program: Command) => void }>;
}

export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'calibrate',
    term: 'calibrate [options]',
    summary:
      'The main job: check measurements, fit every family, gate, write registry/<chip>.yaml, validate on held-out steps, write the report',
    load: () => import('./calibrate.ts'),
  },
  {
    name: 'import',
    term: 'import [options] <format> <paths...>',
    summary:
      'Import measurements: aiconfigurator (CSV/Parquet tables), nccl-tests (stdout), splitwise (perf_model.csv), system (descriptor YAML → chip file)',
    load: () => import('./import.ts'),
  },
  {
    name: 'fit',
    term: 'fit [options] <family>',
    summary:
      'fit coefficients from stored measurements: <family> is one of gemm, hbm, attention_decode, attention_prefill, sparse, mla, collective, expert_alltoall, moe, moe_experts, recurrent, host, all or engine (an engine profile from step timings)',
    load: () => import('./fit.ts'),
  },
  {
    name: 'registry',
    term: 'registry',
    summary: 'validate, diff, update (gated), export/import and extrapolate coefficient registries',
    load: () => import('./registry.ts'),
  },
  {
    name: 'onboard',
    term: 'onboard [options]',
    summary: 'upstream chip folder → catalog entry → import → fit all → extrapolation → gates → registry + coverage',
    load: () => import('./onboard.ts'),
  },
  {
    name: 'price',
    term: 'price [options]',
    summary: 'price one step of a batch: NoOverlap, CMOverlap, Overlap, bottleneck and per-resource µs',
    load: () => import('./price.ts'),
  },
  {
    name: 'sweep',
    term: 'sweep [options]',
    summary:
      'per-resource time and the three estimates (NoOverlap, CMOverlap, Overlap) vs batch size (every request decoding one token)',
    load: () => import('./sweep.ts'),
  },
  {
    name: 'serve',
    term: 'serve [options]',
    summary: 'serving-level prediction: a vLLM-style scheduler on the step pricer → TTFT, ITL/TPOT, E2E, tokens/s',
    load: () => import('./serve.ts'),
  },
  {
    name: 'validate',
    term: 'validate [options]',
    summary:
      'Price held-out step timings with the registry and report the error per regime (NoOverlap, CMOverlap and Overlap)',
    load: () => import('./validate.ts'),
  },
  {
    name: 'roofline',
    term: 'roofline [options]',
    summary: 'Sweep the step law T(R,N) = h + max(M(R)/W, F(N)/P) and useful throughput U/T (chapter 2 §2.1–2.3)',
    load: () => import('./roofline.ts'),
  },
  {
    name: 'trace',
    term: 'trace [options] <file>',
    summary: 'Request timelines: queue, prompt, publish gap, TTFT, token gaps and their aggregates (chapter 2 §2.4)',
    load: () => import('./trace.ts'),
  },
  {
    name: 'window',
    term: 'window [options] [file]',
    summary:
      'Steps/s over selected benchmark intervals (pairs first, then drop pairs ending at a flagged step) and token rates (chapter 2 §2.5.3–2.5.5)',
    load: () => import('./window.ts'),
  },
  {
    name: 'flops',
    term: 'flops [options]',
    summary:
      'Main-model FLOPs of one step from scheduled (q, k): (attention, total), plain or FP8-equivalent, and MFU (chapter 2 §2.5.1-2.5.2)',
    load: () => import('./flops.ts'),
  },
];
