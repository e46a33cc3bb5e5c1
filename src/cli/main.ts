/**
 * stepcal command-line entry point: commander wiring only. Each command lives in its own module
 * under `./commands/` and exports `register(program)`.
 *
 * Exit codes (issue 12 item 7): 0 success; 1 user or data error (one line on stderr, stack only with
 * --debug), including file-system refusals (read-only folder, a folder where a file is expected) and
 * malformed YAML that escaped a loader; 2 usage error (bad flag, unknown command, no command);
 * 3 internal error (a bug: "please report" and the stack).
 */
import { Command, CommanderError } from 'commander';
import { UsageError, UserError } from '../core/errors.ts';
import { checkName } from '../core/io/paths.ts';
import { writeError } from '../core/io/staging.ts';
import { COMMANDS } from './commands/index.ts';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('stepcal')
    .description('Calibrate and validate LLM-inference step cost models from measured GPU timings.')
    .version(VERSION)
    .option('--debug', 'print stack traces for errors')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
  for (const register of COMMANDS) register(program);
  for (const c of program.commands) c.exitOverride();
  // Names that become paths are checked once, for every command (src/core/io/paths.ts); a value
  // ending in .yaml is an explicit file the user chose (--model graph.yaml), not a name.
  program.hook('preAction', (_cmd, action) => {
    const o = action.opts() as Record<string, unknown>;
    for (const key of NAME_FLAGS) {
      const v = o[key];
      if (typeof v === 'string' && !/\.ya?ml$/.test(v)) checkName(`--${key}`, v);
    }
  });
  return program;
}

export const VERSION = '0.1.0';

/** Flags whose value is a name joined to a folder (chip, model, registry copy source and target). */
const NAME_FLAGS = ['chip', 'model', 'from', 'to'] as const;

let pipeGuardInstalled = false;

/** Run the CLI with `argv` (as in process.argv). Resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  // A closed pipe (`stepcal price ... | head`) is not an error: stop writing quietly.
  if (!pipeGuardInstalled) {
    pipeGuardInstalled = true;
    process.stdout.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
  }
  const program = buildProgram();
  const debug = argv.includes('--debug');
  if (argv.slice(2).filter((a) => a !== '--debug').length === 0) {
    program.outputHelp({ error: true });
    process.stderr.write('stepcal: no command given\n');
    return 2;
  }
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    return exitCodeFor(err, debug);
  }
}

/** errno codes of file-system refusals that are the user's to fix (exit 1, not a bug). */
const USER_ERRNO: ReadonlySet<string> = new Set([
  'ENOENT',
  'EACCES',
  'EPERM',
  'EROFS',
  'EISDIR',
  'ENOTDIR',
  'ENOSPC',
  'EEXIST',
  'ENAMETOOLONG',
  'ELOOP',
]);

/** Print `err` as the CLI does and return its exit code (module comment). */
export function exitCodeFor(err: unknown, debug: boolean): number {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help')
      return 0;
    return 2;
  }
  let user: UserError | undefined = err instanceof UserError ? err : undefined;
  const e = err as NodeJS.ErrnoException;
  if (!user && e && typeof e.code === 'string' && USER_ERRNO.has(e.code) && typeof e.path === 'string')
    user = writeError(e.path, e);
  if (
    !user &&
    e &&
    (e.name === 'YAMLParseError' ||
      e.name === 'YAMLWarning' ||
      (e instanceof ReferenceError && /alias/i.test(e.message)))
  ) {
    user = new UserError(`YAML error: ${e.message}`);
  }
  if (user) {
    process.stderr.write(`stepcal: ${user.message}\n`);
    if (debug && (err as Error).stack) process.stderr.write((err as Error).stack + '\n');
    return user instanceof UsageError ? 2 : 1;
  }
  process.stderr.write(
    `stepcal: internal error (a bug in stepcal; please report it with the command line and this trace):\n${(err as Error)?.stack ?? String(err)}\n`,
  );
  return 3;
}
