/**
 * Step 1 of `stepcal calibrate`: check every stored file of a chip against its provenance before
 * anything is fitted. Reads files, writes nothing.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../core/errors.ts';
import { sha256File } from '../core/io/fs.ts';
import { displayPath } from '../core/io/paths.ts';
import { listMeasurementFiles, listStepFiles, provenancePath, readProvenance, readStepsFile } from './store.ts';

/** Row counts found by the measurement check. */
export interface MeasurementCheck {
  file: string;
  family: string;
  lane: string;
  rows: number;
  /** 'ok' or what is wrong (sha256 mismatch against provenance, missing provenance). */
  status: string;
}

const SHA_DIFFERS = 'sha256 differs from provenance output_sha256';

/** One per-operator file: sha256 against the provenance's output_sha256, rows from the provenance. */
function checkDataFile(f: { file: string; family: string; lane: string }): MeasurementCheck {
  const base = { file: displayPath(f.file), family: f.family, lane: f.lane };
  if (!existsSync(provenancePath(f.file))) return { ...base, rows: 0, status: 'no provenance file' };
  const prov = readProvenance(f.file);
  return { ...base, rows: prov.rows_out, status: prov.output_sha256 === sha256File(f.file) ? 'ok' : SHA_DIFFERS };
}

/** One held-out step file: parsed (format errors throw), sha256 checked when it has a provenance file. */
function checkStepFile(f: string): MeasurementCheck {
  const { rows } = readStepsFile(f);
  const lane = path.basename(f).replace(/\.steps\.csv(\.gz)?$/, '');
  let status = 'ok';
  if (existsSync(provenancePath(f))) {
    const prov = readProvenance(f);
    if (prov.output_sha256 && prov.output_sha256 !== sha256File(f)) status = SHA_DIFFERS;
  }
  return { file: displayPath(f), family: 'step (held-out)', lane, rows: rows.length, status };
}

/**
 * Check every stored file of a chip directory. Per-operator files: sha256 against the provenance's
 * output_sha256, row count from the provenance. Step files: parsed (format errors stop the job).
 * @throws UserError when the directory holds no measurements; InputError for a malformed step file
 */
export function checkMeasurements(dir: string): MeasurementCheck[] {
  const files = listMeasurementFiles(dir);
  if (!files.length)
    throw new UserError(`no measurements in ${displayPath(dir)} (import some with \`stepcal import\`)`);
  return [...files.map(checkDataFile), ...listStepFiles(dir).map(checkStepFile)];
}
