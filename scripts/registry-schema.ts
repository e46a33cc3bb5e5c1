/**
 * Writes docs/registry.schema.json, the JSON Schema (draft 2020-12) of one registry document, from the
 * zod schema in src/core/schemas/registry.ts. Run `node bin/run-ts.mjs scripts/registry-schema.ts`;
 * test/core/schemas.test.ts fails when the committed file is stale.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../src/core/catalog/chip.ts';
import { registryJsonSchemaText } from '../src/core/schemas/registry.ts';

writeFileSync(path.join(REPO_ROOT, 'docs', 'registry.schema.json'), registryJsonSchemaText());
