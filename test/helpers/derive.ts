/**
 * A committed model config as a test's starting point (catalog/models/<name>/config.json): the parsed
 * config, a copy with its `text_config` edited, and the deriver run on any config. Shared by the
 * deriver tests of the multimodal-wrapped configs (gemma-4, Qwen3.5, Kimi-K3).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { deriveGraph } from '../../src/core/catalog/model-derive.ts';

type Config = { text_config: Record<string, unknown> } & Record<string, unknown>;

export function configFixture(model: string): {
  base: Config;
  edited: (edit: (t: Record<string, unknown>) => void) => Config;
  derive: (c: Record<string, unknown>) => ReturnType<typeof deriveGraph>;
} {
  const base = JSON.parse(readFileSync(path.join(REPO_ROOT, 'catalog/models', model, 'config.json'), 'utf8')) as Config;
  const edited = (edit: (t: Record<string, unknown>) => void) => {
    const c = structuredClone(base);
    edit(c.text_config);
    return c;
  };
  return { base, edited, derive: (c) => deriveGraph(c, 'test', JSON.stringify(c)) };
}
