import { clip } from '../base/user-text.js';
import { WardenError } from '../base/errors.js';
import { givenValue, originText, VALUE_CHARS, type Loaded } from './loaded.js';
import { checkRelations } from './relations.js';
import {
  ConfigError,
  type Config,
  type Environment,
  type FlagValues,
  type Origin,
  type SettingKey,
  type SettingSpec,
} from './setting-spec.js';
import { SETTINGS } from './settings.js';

/**
 * Builds the configuration from env and flags. Throws ConfigError for the first problem; nothing is
 * half-applied because the caller gets either a whole Config or the error. With `only`, just those
 * settings are read and checked (and relations among them); reading any other from the result is a
 * programming error and throws, so a command cannot silently get a default it did not ask for.
 */
export function loadConfig(env: Environment, flags: FlagValues = {}, only?: readonly SettingKey[]): Config {
  const selected = new Set<SettingKey>(only ?? SETTINGS.map((spec) => spec.key));
  const loaded: Loaded = { values: {}, given: {}, selected };
  for (const spec of SETTINGS as readonly SettingSpec[]) {
    if (!selected.has(spec.key)) continue;
    const given = givenValue(spec, env, flags);
    const raw = given?.raw ?? spec.defaultValue;
    if (raw === undefined) {
      loaded.values[spec.key] = undefined;
      continue;
    }
    const origin: Origin = given?.origin ?? { kind: 'default' };
    try {
      loaded.values[spec.key] = spec.parse(raw, origin);
    } catch (error) {
      throw new ConfigError(
        `invalid ${spec.env} (${originText(spec, origin)}) = ` +
          `${JSON.stringify(clip(raw, VALUE_CHARS))}: ${spec.allowed}`,
        { cause: error },
      );
    }
    if (given) loaded.given[spec.key] = given;
  }
  checkRelations(loaded);
  return guarded(loaded);
}

function guarded(loaded: Loaded): Config {
  const config: Record<string, unknown> = { ...loaded.values };
  for (const spec of SETTINGS) {
    if (loaded.selected.has(spec.key)) continue;
    Object.defineProperty(config, spec.key, {
      enumerable: false,
      get: () => {
        throw new WardenError(`internal error: setting ${spec.env} read by a command that does not declare it`);
      },
    });
  }
  return config as unknown as Config;
}
