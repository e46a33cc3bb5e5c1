/**
 * stepcal command-line entry point: commander wiring only. Each command lives in its own module
 * under `./commands/` and exports `register(program)`.
 *
 * Exit codes: 0 success; 1 user error (message on stderr, stack only with --debug); 2 usage error.
 */
import { Command, CommanderError } from 'commander';
import { UsageError, UserError } from '../core/errors.ts';
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
  return program;
}

export const VERSION = '0.1.0';

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
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return 0;
      return 2;
    }
    if (err instanceof UserError) {
      process.stderr.write(`stepcal: ${err.message}\n`);
      if (debug && err.stack) process.stderr.write(err.stack + '\n');
      return err instanceof UsageError ? 2 : 1;
    }
    process.stderr.write(`stepcal: internal error: ${(err as Error)?.stack ?? String(err)}\n`);
    return 3;
  }
}
