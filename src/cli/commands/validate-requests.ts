/**
 * `stepcal validate --requests <files...>`: request-level rows (docs/validation.md "Request-level
 * rows") replayed through serve and scored per metric. A `*.steps.csv` file contributes its static
 * batches (the Splitwise set); any other file is read as the request-level CSV.
 */
import { readText } from '../../core/io/fs.ts';
import { loadRegistryFile } from '../../registry/load.ts';
import { requestValidationTable } from '../../report/requests.ts';
import {
  parseRequestsCsv,
  requestRowsFromStaticBatches,
  validateRequestRows,
  type RequestRow,
} from '../../validate/requests.ts';
import { readStepsFile } from '../../validate/steps.ts';
import { displayPath } from '../../core/io/paths.ts';

/** Request-level rows of one file. */
function rowsOf(file: string): RequestRow[] {
  const text = readText(file);
  const header = text
    .slice(0, text.indexOf('\n'))
    .split(',')
    .map((h) => h.trim());
  if (header.includes('kind') && header.includes('measured_us')) {
    return requestRowsFromStaticBatches(readStepsFile(file).rows.map((r) => ({ ...r, file: displayPath(file) })));
  }
  return parseRequestsCsv(text, displayPath(file));
}

/** Run and print (table or JSON). */
export function runRequestValidation(o: {
  chip: string;
  files: string[];
  registryFile: string;
  json?: boolean;
  scoreFlagged?: boolean;
}): void {
  const rows = o.files.flatMap(rowsOf);
  const v = validateRequestRows(rows, {
    chip: o.chip,
    registry: loadRegistryFile(o.registryFile),
    ...(o.scoreFlagged ? { excludeFlags: {} } : {}),
  });
  process.stdout.write(o.json ? `${JSON.stringify(v, null, 1)}\n` : requestValidationTable(v));
}
