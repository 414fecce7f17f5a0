import { parseArgs } from 'node:util';
import { ConfigError, type Config, type Environment } from '../config/setting-spec.js';
import { SETTINGS, settingsOf, type SettingGroup } from '../config/settings.js';
import { loadConfig } from '../config/load.js';
import { describeError, WardenError } from '../base/errors.js';

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
  /** Another flag of the same command this one only makes sense with (`--exit-after-demo` needs `--demo`). */
  requires?: string;
}

const USAGE_ERROR = Symbol.for('vgpu-warden.usage-error');

export interface CommandContext {
  io: CliIo;
  flags: Readonly<Record<string, string | boolean | string[] | undefined>>;
  /** The words after the command name that are not flags; always empty for a command without `arguments`. */
  positionals: readonly string[];
  /**
   * Validated configuration from env and the config flags of this command: only the settings of
   * the command's `settings` groups (reading another throws), all of them without `settings`.
   */
  config: () => Config;
}

export interface Command {
  name: string;
  summary: string;
  /** Issue that will bring this command; while set, running it says so and exits 1. */
  plannedIn?: number;
  usesConfig: boolean;
  /** The positional arguments it takes, as shown in its usage line (e.g. `<namespace>/<pod>`); none when absent. */
  arguments?: string;
  /**
   * The setting groups this command reads (config.ts SETTING_GROUPS); only those are validated, so
   * a bad value of a setting it never reads does not stop it. Omitted: every setting (serve).
   */
  settings?: readonly SettingGroup[];
  flags: Readonly<Record<string, FlagSpec>>;
  run: (context: CommandContext) => Promise<number>;
}

/**
 * Wrong words on the command line: one line on stderr, exit code 2. Recognised by a registered symbol rather than by
 * class identity, because a lazily loaded command (local-run.ts) may see its own copy of this module
 * where a loader keeps two (tsx under mocha loads the tests' imports as CommonJS, import() as ESM).
 */
export class UsageError extends WardenError {
  readonly [USAGE_ERROR] = true;
}

export function isUsageError(error: unknown): error is UsageError {
  return typeof error === 'object' && error !== null && USAGE_ERROR in error;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

const CONFIG_FLAGS: Record<string, FlagSpec> = Object.fromEntries(
  SETTINGS.map((spec) => [spec.flag, { type: 'string', description: `${spec.description} (env ${spec.env})` }]),
);

export function configFlags(): Readonly<Record<string, FlagSpec>> {
  return CONFIG_FLAGS;
}

/** The flag of one setting, for a command that offers only some of them (e.g. --kubeconfig). */
export function configFlag(name: string): FlagSpec {
  const spec = CONFIG_FLAGS[name];
  if (spec === undefined) throw new Error(`unreachable: no setting with flag --${name}`);
  return spec;
}

/**
 * --context: a flag of every command that talks to a cluster. Not a setting: kubectl has no
 * environment variable for it either, and `serve` in a cluster never needs it.
 */
const CONTEXT_FLAG: FlagSpec = {
  type: 'string',
  description: 'the kubeconfig context to use instead of its current-context (as kubectl --context)',
};

export function contextFlag(): FlagSpec {
  return CONTEXT_FLAG;
}

/** The --context a command was given, if any (an empty value counts as none, as in kubectl). */
export function contextOf(flags: CommandContext['flags']): string | undefined {
  return typeof flags.context === 'string' && flags.context !== '' ? flags.context : undefined;
}

/** What the CLI says about itself: the package version for --version (main reads it once). */
export interface CliAbout {
  version?: string;
}

function commandHelp(command: Command): string[] {
  const lines = [
    `Usage: vgpu-warden ${command.name}${command.arguments === undefined ? '' : ` ${command.arguments}`} [flags]`,
    '',
    command.summary,
    '',
    'Flags:',
  ];
  const help: FlagSpec = { type: 'boolean', description: 'show this help' };
  const entries = Object.entries({ ...command.flags, help });
  const width = Math.max(...entries.map(([name, spec]) => name.length + (spec.type === 'string' ? 8 : 0)));
  // Commands without short flags keep the plain `--flag` column; with one, every long flag shifts so they line up.
  const hasShort = entries.some(([, spec]) => spec.short !== undefined);
  for (const [name, spec] of entries) {
    const left = spec.type === 'string' ? `${name} <value>` : name;
    const short = spec.short === undefined ? (hasShort ? '    ' : '') : `-${spec.short}, `;
    const repeatable = spec.multiple ? ' (repeatable)' : '';
    const needs = spec.requires === undefined ? '' : ` (needs --${spec.requires})`;
    lines.push(`  ${short}--${left.padEnd(width)}  ${spec.description}${repeatable}${needs}`);
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
    ...commands.map((command) => {
      const planned = command.plannedIn ? ` (not available yet: issue #${command.plannedIn})` : '';
      return `  ${command.name.padEnd(width)}  ${command.summary}${planned}`;
    }),
    '',
    'Run "vgpu-warden <command> --help" for the flags of a command, "vgpu-warden --version" for the version.',
  ];
}

interface ParsedCommandLine {
  flags: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
}

function parseCommandLine(command: Command, argv: readonly string[]): ParsedCommandLine {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean' },
  };
  for (const [name, spec] of Object.entries(command.flags)) {
    options[name] = {
      type: spec.type,
      multiple: spec.multiple ?? false,
      ...(spec.short === undefined ? {} : { short: spec.short }),
    };
  }
  try {
    const parsed = parseArgs({
      args: [...argv],
      options,
      strict: true,
      allowPositionals: command.arguments !== undefined,
    });
    return { flags: parsed.values as ParsedCommandLine['flags'], positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError(usageMessage(command, error), { cause: error });
  }
}

/** A flag given without the flag it needs is a mistake to say, not a setting to ignore silently. */
function checkRequiredFlags(command: Command, values: Readonly<Record<string, unknown>>): void {
  for (const [name, spec] of Object.entries(command.flags)) {
    if (spec.requires === undefined || values[name] === undefined || values[name] === false) continue;
    if (values[spec.requires] === undefined || values[spec.requires] === false) {
      throw new UsageError(
        `--${name} needs --${spec.requires} for "${command.name}"; see "vgpu-warden ${command.name} --help"`,
      );
    }
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
export async function runCli(
  argv: readonly string[],
  commands: readonly Command[],
  io: CliIo,
  about: CliAbout = {},
): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    topHelp(commands).forEach((line) => {
      io.stdout(line);
    });
    return first === undefined ? EXIT_USAGE : EXIT_OK;
  }
  if (first === '--version') {
    if (rest.length > 0) {
      io.stderr(
        `vgpu-warden: --version takes no arguments (got ${JSON.stringify(rest.join(' ').slice(0, 60))}); see ` +
          `"vgpu-warden --help"`,
      );
      return EXIT_USAGE;
    }
    io.stdout(about.version ?? 'unknown');
    return EXIT_OK;
  }
  const command = commands.find((candidate) => candidate.name === first);
  if (!command) {
    const what = first.startsWith('-') ? `unknown flag ${first}` : `unknown command "${first}"`;
    io.stderr(`vgpu-warden: ${what}; commands: ${commands.map((c) => c.name).join(', ')} (see "vgpu-warden --help")`);
    return EXIT_USAGE;
  }
  try {
    const { flags, positionals } = parseCommandLine(command, rest);
    if (flags.help === true) {
      commandHelp(command).forEach((line) => {
        io.stdout(line);
      });
      return EXIT_OK;
    }
    checkRequiredFlags(command, flags);
    let config: Config | undefined;
    const configFlagValues = Object.fromEntries(
      SETTINGS.map((spec) => [
        spec.flag,
        typeof flags[spec.flag] === 'string' ? (flags[spec.flag] as string) : undefined,
      ]),
    );
    // Validate once, up front, so a bad value fails before anything starts.
    const only = command.settings === undefined ? undefined : settingsOf(command.settings);
    if (command.usesConfig) config = loadConfig(io.env, configFlagValues, only);
    if (command.plannedIn !== undefined) {
      io.stderr(`vgpu-warden: "${command.name}" is not available yet (issue #${command.plannedIn})`);
      return EXIT_FAILURE;
    }
    return await command.run({
      io,
      flags,
      positionals,
      config: () => config ?? loadConfig(io.env, configFlagValues, only),
    });
  } catch (error) {
    const isUsage = isUsageError(error) || error instanceof ConfigError;
    io.stderr(`vgpu-warden: ${isUsage ? error.message : describeError(error)}`);
    return isUsage ? EXIT_USAGE : EXIT_FAILURE;
  }
}
