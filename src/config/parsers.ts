import { delimiter } from 'node:path';
import { validateCronExpression } from 'cron';
import { parseDuration } from '../base/duration.js';
import { isDnsLabel, isDnsSubdomain } from '../base/k8s-names.js';
import { canonicalHostOrUndefined } from '../base/net-hosts.js';
import { GPU_CORE_POLICIES, type GpuCorePolicy } from '../hami/wire.js';
import type { KubeconfigSetting } from './kubeconfig-setting.js';
import { InvalidValue, LOG_LEVELS, type LogLevel, type Parser } from './setting-spec.js';

/* The value parsers of the settings table: raw text in, a typed value out, or InvalidValue. Pure. */

export const port: Parser<number> = (raw) => {
  if (!/^\d+$/.test(raw)) throw new InvalidValue();
  const value = Number(raw);
  if (value < 1 || value > 65535) throw new InvalidValue();
  return value;
};

export const duration: Parser<number> = (raw) => {
  try {
    return parseDuration(raw);
  } catch (error) {
    throw new InvalidValue('', { cause: error });
  }
};

export const positiveDuration: Parser<number> = (raw) => {
  const value = duration(raw);
  if (value <= 0) throw new InvalidValue();
  return value;
};

export const optionalPositiveDuration: Parser<number | undefined> = (raw) =>
  raw === '' ? undefined : positiveDuration(raw);

export const boolean: Parser<boolean> = (raw) => {
  const lowered = raw.toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
  if (['false', '0', 'no', 'off'].includes(lowered)) return false;
  throw new InvalidValue();
};

export const host: Parser<string> = (raw) => {
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(raw)) throw new InvalidValue();
  return raw;
};

export const nonEmpty: Parser<string> = (raw) => {
  if (raw.trim() === '') throw new InvalidValue();
  return raw;
};

// A DNS-1123 subdomain, which is what the apiserver accepts for spec.schedulerName.
export const dnsSubdomain: Parser<string> = (raw) => {
  if (!isDnsSubdomain(raw)) throw new InvalidValue();
  return raw;
};

export const wholeNumber: Parser<number> = (raw) => {
  if (!/^\d+$/.test(raw) || Number(raw) > 64) throw new InvalidValue();
  return Number(raw);
};

export const dnsLabel: Parser<string> = (raw) => {
  if (!isDnsLabel(raw)) throw new InvalidValue();
  return raw;
};

export const optionalDnsSubdomain: Parser<string | undefined> = (raw) => (raw === '' ? undefined : dnsSubdomain(raw));

// Checked with the same rules the certificate code applies, so a bad host fails here at start
// and not later inside the certificate keeper.
export const hostList: Parser<string[]> = (raw) => {
  const hosts = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  const bad = hosts.find((entry) => canonicalHostOrUndefined(entry) === undefined);
  if (bad !== undefined)
    throw new InvalidValue(`invalid host ${JSON.stringify(bad)}: expected a DNS name or an IP address`);
  return hosts;
};

export const placementPolicy: Parser<'binpack' | 'spread'> = (raw) => {
  if (raw !== 'binpack' && raw !== 'spread') throw new InvalidValue();
  return raw;
};

export const gpuCorePolicy: Parser<GpuCorePolicy> = (raw) => {
  const found = GPU_CORE_POLICIES.find((policy) => policy === raw);
  if (found === undefined) throw new InvalidValue();
  return found;
};

export const cron: Parser<string> = (raw) => {
  const fields = raw.trim().split(/\s+/);
  if (fields.length < 5 || fields.length > 6 || !validateCronExpression(raw).valid) throw new InvalidValue();
  return raw.trim();
};

export const logLevel: Parser<LogLevel> = (raw) => {
  const found = LOG_LEVELS.find((level) => level === raw);
  if (found === undefined) throw new InvalidValue();
  return found;
};

// kubectl's rules: KUBECONFIG is a list (path.delimiter, ':' on Linux) whose empty entries are
// skipped, and an empty KUBECONFIG counts as unset; --kubeconfig is one file, taken as written.
export const kubeconfigSetting: Parser<KubeconfigSetting | undefined> = (raw, origin) => {
  if (origin?.kind === 'flag')
    return raw === '' ? undefined : { paths: [raw], origin: `KUBECONFIG (flag --${origin.name})`, explicit: true };
  const paths = raw.split(delimiter).filter((path) => path !== '');
  return paths.length === 0 ? undefined : { paths, origin: 'KUBECONFIG (env)', explicit: false };
};
