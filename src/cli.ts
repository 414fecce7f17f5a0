import { parseArgs } from 'node:util';
import { ConfigError, SETTINGS, loadConfig, type Config, type Environment } from './config.js';
import { describeError, WardenError } from './errors.js';

/** What a command gets from the outside world; injected so the CLI is testable without a process. */
export interface CliIo {
  env: Environment;
  stdout: (line: string) => void;
  stderr: (line: string) => void;
}

export interface FlagSpec {
  type: 'string' | 'boolean';
  description: string;
  multiple?: boolean;
  /** One-letter alias, as in `-o json`. */
  short?: string;
}

export interface CommandContext {
  io: CliIo;
  flags: Readonly<Record<string, string | boolean | string[] | undefined>>;
  /** Validated configuration from env and the config flags of this command. */
  config: () => Config;
}

export interface Command {
  name: string;
  summary: string;
  /** Issue that will bring this command; while set, running it says so and exits 1. */
  plannedIn?: number;
  usesConfig: boolean;
  flags: Readonly<Record<string, FlagSpec>>;
  run: (context: CommandContext) => Promise<number>;
}

/** Wrong words on the command line: one line on stderr, exit code 2. */
export class UsageError extends WardenError {}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

const CONFIG_FLAGS: Record<string, FlagSpec> = Object.fromEntries(
  SETTINGS.map((spec) => [spec.flag, { type: 'string', description: `${spec.description} (env ${spec.env})` }]),
);

export function configFlags(): Readonly<Record<string, FlagSpec>> {
  return CONFIG_FLAGS;
}

function commandHelp(command: Command): string[] {
  const lines = [`Usage: vgpu-warden ${command.name} [flags]`, '', command.summary, '', 'Flags:'];
  const help: FlagSpec = { type: 'boolean', description: 'show this help' };
  const entries = Object.entries({ ...command.flags, help });
  const width = Math.max(...entries.map(([name, spec]) => name.length + (spec.type === 'string' ? 8 : 0)));
  // Commands without short flags keep the plain `--flag` column; with one, every long flag shifts so they line up.
  const hasShort = entries.some(([, spec]) => spec.short !== undefined);
  for (const [name, spec] of entries) {
    const left = spec.type === 'string' ? `${name} <value>` : name;
    const short = spec.short === undefined ? (hasShort ? '    ' : '') : `-${spec.short}, `;
    lines.push(`  ${short}--${left.padEnd(width)}  ${spec.description}${spec.multiple ? ' (repeatable)' : ''}`);
  }
  return lines;
}

function topHelp(commands: readonly Command[]): string[] {
  const width = Math.max(...commands.map((command) => command.name.length));
  return [
    'Usage: vgpu-warden <command> [flags]',
    '',
    'GPU-sharing control plane for Kubernetes, wire-compatible with HAMi: admission webhook,',
    'scheduler extender and node-lock sweeper.',
    '',
    'Commands:',
    ...commands.map((command) =>
      `  ${command.name.padEnd(width)}  ${command.summary}${command.plannedIn ? ` (not available yet: issue #${command.plannedIn})` : ''}`),
    '',
    'Run "vgpu-warden <command> --help" for the flags of a command.',
  ];
}

function parseCommandFlags(command: Command, argv: readonly string[]): Record<string, string | boolean | string[] | undefined> {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = { help: { type: 'boolean' } };
  for (const [name, spec] of Object.entries(command.flags)) {
    options[name] = { type: spec.type, multiple: spec.multiple ?? false, ...(spec.short === undefined ? {} : { short: spec.short }) };
  }
  try {
    const { values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false });
    return values as Record<string, string | boolean | string[] | undefined>;
  } catch (error) {
    throw new UsageError(usageMessage(command, error), { cause: error });
  }
}

function usageMessage(command: Command, error: unknown): string {
  const code = (error as { code?: string }).code;
  const quoted = /'([^']+)'/.exec(error instanceof Error ? error.message : '')?.[1] ?? '';
  const hint = `see "vgpu-warden ${command.name} --help"`;
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown flag ${quoted} for "${command.name}"; ${hint}`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${JSON.stringify(quoted)} for "${command.name}"; ${hint}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const flag = /--[\w-]+/.exec(error instanceof Error ? error.message : '')?.[0] ?? 'a flag';
      return `${flag} needs a value (or takes none) for "${command.name}"; ${hint}`;
    }
    default:
      return `${describeError(error)}; ${hint}`;
  }
}

/** Runs the CLI and returns the process exit code; never throws. */
export async function runCli(argv: readonly string[], commands: readonly Command[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    topHelp(commands).forEach((line) => { io.stdout(line); });
    return first === undefined ? EXIT_USAGE : EXIT_OK;
  }
  const command = commands.find((candidate) => candidate.name === first);
  if (!command) {
    const what = first.startsWith('-') ? `unknown flag ${first}` : `unknown command "${first}"`;
    io.stderr(`vgpu-warden: ${what}; commands: ${commands.map((c) => c.name).join(', ')} (see "vgpu-warden --help")`);
    return EXIT_USAGE;
  }
  try {
    const flags = parseCommandFlags(command, rest);
    if (flags.help === true) {
      commandHelp(command).forEach((line) => { io.stdout(line); });
      return EXIT_OK;
    }
    let config: Config | undefined;
    const configFlagValues = Object.fromEntries(
      SETTINGS.map((spec) => [spec.flag, typeof flags[spec.flag] === 'string' ? (flags[spec.flag] as string) : undefined]),
    );
    // Validate once, up front, so a bad value fails before anything starts.
    if (command.usesConfig) config = loadConfig(io.env, configFlagValues);
    if (command.plannedIn !== undefined) {
      io.stderr(`vgpu-warden: "${command.name}" is not available yet (issue #${command.plannedIn})`);
      return EXIT_FAILURE;
    }
    return await command.run({
      io,
      flags,
      config: () => config ?? loadConfig(io.env, configFlagValues),
    });
  } catch (error) {
    const isUsage = error instanceof UsageError || error instanceof ConfigError;
    io.stderr(`vgpu-warden: ${isUsage ? error.message : describeError(error)}`);
    return isUsage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
