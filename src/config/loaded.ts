import { clip } from '../base/user-text.js';
import type { Environment, FlagValues, Origin, SettingKey, SettingSpec } from './setting-spec.js';
import { SETTINGS } from './settings.js';

/* What reading the settings collected, and how messages name a setting and its source. */

/** Longest value a message repeats: values are user input and may be any length. */
export const VALUE_CHARS = 100;

export interface Given {
  origin: Origin;
  raw: string;
}

/** What the checks see: the parsed values and, for settings the user set, where they came from. */
export interface Loaded {
  values: Partial<Record<SettingKey, unknown>>;
  given: Partial<Record<SettingKey, Given>>;
  selected: ReadonlySet<SettingKey>;
}

export function specOf(key: SettingKey): SettingSpec {
  const spec = (SETTINGS as readonly SettingSpec[]).find((candidate) => candidate.key === key);
  if (spec === undefined) throw new Error(`unreachable: no setting ${key}`);
  return spec;
}

export function givenValue(spec: SettingSpec, env: Environment, flags: FlagValues): Given | undefined {
  const flagValue = flags[spec.flag];
  if (flagValue !== undefined) return { origin: { kind: 'flag', name: spec.flag }, raw: flagValue };
  for (const name of [spec.env, ...(spec.aliases ?? [])]) {
    const value = env[name];
    if (value !== undefined) return { origin: { kind: 'env', name }, raw: value };
  }
  return undefined;
}

/** `flag --x`, `env` (the setting's own variable), `env HAMI_X` (an alias) or `default`. */
export function originText(spec: SettingSpec, origin: Origin): string {
  if (origin.kind === 'flag') return `flag --${origin.name}`;
  if (origin.kind === 'env') return origin.name === spec.env ? 'env' : `env ${origin.name}`;
  return 'default';
}

/** `NODELOCK_EXPIRE (env HAMI_NODELOCK_EXPIRE) = 30s`, or `BIND_GRACE (default 60s)`. */
export function describe(key: SettingKey, loaded: Loaded): string {
  const spec = specOf(key);
  const given = loaded.given[key];
  if (given === undefined) {
    const unset = spec.defaultValue === undefined || spec.defaultValue === '';
    return `${spec.env} (default ${unset ? 'unset' : spec.defaultValue})`;
  }
  return `${spec.env} (${originText(spec, given.origin)}) = ${clip(given.raw, VALUE_CHARS)}`;
}

export function uses(loaded: Loaded, ...keys: SettingKey[]): boolean {
  return keys.every((key) => loaded.selected.has(key));
}
