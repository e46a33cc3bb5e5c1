/**
 * Regenerate `catalog/models/<name>/graph.yaml` from its `config.json` (the deriver's output).
 * Run: `node bin/run-ts.mjs src/core/catalog/model-regen.ts [name ...]` (all models when none named).
 * An intentional hand edit of a graph is lost by regenerating it; edit the deriver instead, or keep
 * the edit and update the equality test (test/catalog/model.test.ts) deliberately.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../io/fs.ts';
import { deriveGraph } from './model-derive.ts';
import { loadHfQuantConfig, loadModelConfigText, MODELS_DIR, parseConfigJson, stringifyGraph } from './model.ts';
import { readdirSync } from 'node:fs';

/** Derive the graph YAML text of a shipped model from its config.json. */
export function derivedGraphText(name: string, dir = MODELS_DIR): string {
  const text = loadModelConfigText(name, dir);
  return stringifyGraph(deriveGraph(parseConfigJson(text), name, text, loadHfQuantConfig(name, dir)));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2).length ? process.argv.slice(2) : readdirSync(MODELS_DIR).sort();
  for (const n of names) {
    writeFileAtomic(path.join(MODELS_DIR, n, 'graph.yaml'), derivedGraphText(n));
    process.stdout.write(`wrote catalog/models/${n}/graph.yaml\n`);
  }
}
