/**
 * stepcal command-line entry point: commander wiring only. Each command lives in its own module
 * under `./commands/`, exports `register(program)` and is loaded only when it runs (`COMMANDS`).
 *
 * Exit codes (issue 12 item 7): 0 success; 1 user or data error (one line on stderr, stack only with
 * --debug), including file-system refusals (read-only folder, a folder where a file is expected) and
 * malformed YAML that escaped a loader; 2 usage error (bad flag, unknown command, no command);
 * 3 internal error (a bug: "please report" and the stack).
 */
import { Command, CommanderError, Help } from 'commander';
import { UsageError, UserError } from '../core/errors.ts';
import { checkName } from '../core/io/paths.ts';
import { writeError } from '../core/io/staging.ts';
import { COMMANDS, type CommandEntry } from './commands/index.ts';

/**
 * The commander program. With `argv`, only the modules that run needs are loaded: the named command's
 * (also after `help`), or none for the top-level help, a version query or an unknown command, where
 * each command is a stub drawn from `COMMANDS` (name, term, summary) that commander can list and
 * suggest. Without `argv` every command is loaded (tests walk the whole tree).
 */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  const program = new Command();
  program
    .name('stepcal')
    .description('Calibrate and validate LLM-inference step cost models from measured GPU timings.')
    .version(VERSION)
    .option('--debug', 'print stack traces for errors')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
  const named = argv && commandNamed(argv);
  if (argv && !named) addStubs(program);
  for (const c of argv ? (named ? [named] : []) : COMMANDS) (await c.load()).register(program);
  for (const c of program.commands) c.exitOverride();
  if (argv && named) program.hook('preSubcommand', (_p, sub) => rejectUnknownFlag(sub, argv));
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

/** The command `argv` runs (its first word that is not a flag, or the word after `help`), if known. */
function commandNamed(argv: readonly string[]): CommandEntry | undefined {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  const word = words[0] === 'help' ? words[1] : words[0];
  return COMMANDS.find((c) => c.name === word);
}

/**
 * Report the first flag `sub` does not know before commander checks the mandatory options, so that a
 * misspelt flag (`--chp h200`) is named as unknown, with commander's suggestion, rather than reported
 * as the missing `--chip` it was meant to be. A word right after a flag that takes a value is that
 * value, not a flag. Throws commander's unknown-option error (exit 2); returns when every flag is known.
 */
function rejectUnknownFlag(sub: Command, argv: readonly string[]): void {
  const args = argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) return;
  const known = new Map<string, boolean>([['--debug', false]]);
  let cmd = sub;
  let i = args.indexOf(sub.name()) + 1;
  for (;;) {
    for (const o of cmd.options) for (const f of [o.long, o.short]) if (f) known.set(f, o.required || o.optional);
    const next = cmd.commands.find((c) => c.name() === args[i]);
    if (!next) break;
    cmd = next;
    i++;
  }
  for (; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--') return;
    if (!a.startsWith('-') || /^-\d/.test(a)) continue;
    const flag = a.split('=')[0] as string;
    const takesValue = known.get(flag);
    if (takesValue === undefined) (cmd as unknown as CommanderInternals).unknownOption(flag);
    if (takesValue && !a.includes('=')) i++;
  }
}

/**
 * Commander's own unknown-option report (message, "Did you mean" suggestion, exit override): public in
 * behaviour, absent from its typings; commander is pinned (14.0.3), and cli-usage.test.ts checks it.
 */
interface CommanderInternals {
  unknownOption(flag: string): never;
}

/**
 * `help <command> [<subcommand> …]` (also `registry help <subcommand>`) as `<command> [<subcommand> …] --help`, each
 * word checked to name a command there: commander alone shows only one level (`help registry update` printed the
 * registry help) and, for a word that names nothing, prints the parent's help and exits 0. `help` alone, or `help help`,
 * is left to commander (the top-level help). Flags after `help` are kept.
 * @returns the argv to parse
 * @throws UsageError (exit 2) `help: unknown command "bogus" (known: calibrate, …)`
 */
function helpArgv(program: Command, argv: readonly string[]): readonly string[] {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  let cmd = program;
  for (let i = 0; i < words.length; i++) {
    const names = cmd.commands.map((c) => c.name());
    if (words[i] === 'help' && names.length && !names.includes('help')) {
      const topics = words.slice(i + 1);
      if (!topics.length || (topics.length === 1 && topics[0] === 'help')) return argv;
      let at = cmd;
      for (const topic of topics) {
        const next = at.commands.find((c) => c.name() === topic || c.aliases().includes(topic));
        if (!next)
          throw new UsageError(
            `help: unknown command "${topic}" (known: ${at.commands.map((c) => c.name()).join(', ')})`,
          );
        at = next;
      }
      const flags = argv.slice(2).filter((a) => a.startsWith('-'));
      return [...argv.slice(0, 2), ...words.slice(0, i), ...topics, ...flags, '--help'];
    }
    const next = cmd.commands.find((c) => c.name() === words[i]);
    if (!next) return argv;
    cmd = next;
  }
  return argv;
}

/** Every command as a stub: listed in the help with its term and summary, never run. */
function addStubs(program: Command): void {
  const terms = new Map(COMMANDS.map((c) => [c.name, c.term]));
  for (const c of COMMANDS) program.command(c.name).description(c.summary);
  const plain = new Help();
  program.configureHelp({ subcommandTerm: (cmd) => terms.get(cmd.name()) ?? plain.subcommandTerm(cmd) });
}

export const VERSION = '0.1.0';

/** Flags whose value is a name joined to a folder (chip, model, registry copy source and target). */
const NAME_FLAGS = ['chip', 'model', 'engine', 'from', 'to'] as const;

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
  const program = await buildProgram(argv);
  const debug = argv.includes('--debug');
  if (argv.slice(2).filter((a) => a !== '--debug').length === 0) {
    program.outputHelp({ error: true });
    process.stderr.write('stepcal: no command given\n');
    return 2;
  }
  try {
    await program.parseAsync(helpArgv(program, argv));
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

/** The `at …` lines of `err.stack` (its first lines repeat the message already printed), '' without a stack. */
function stackFrames(err: Error | undefined): string {
  const stack = err?.stack ?? '';
  const at = stack.search(/\n\s+at /);
  return at < 0 ? '' : `${stack.slice(at + 1)}\n`;
}

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
    if (debug) process.stderr.write(stackFrames(err as Error));
    return user instanceof UsageError ? 2 : 1;
  }
  process.stderr.write(
    `stepcal: internal error (a bug in stepcal; please report it with the command line and this trace):\n${(err as Error)?.stack ?? String(err)}\n`,
  );
  return 3;
}
