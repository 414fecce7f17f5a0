import { isLoopbackHost, listenAddressesOverlap } from '../base/net-hosts.js';
import { clip } from '../base/user-text.js';
import { describe, specOf, uses, VALUE_CHARS, type Loaded } from './loaded.js';
import { ConfigError, type Config, type SettingKey } from './setting-spec.js';

/* Checks between settings: durations that must keep an order, the extender's exposure, listener ports. */

/** Two durations that must keep an order; `why` reads on from "must be shorter than ...". */
interface Ordering {
  shorter: SettingKey;
  longer: SettingKey;
  why: string;
}

const ORDERINGS: readonly Ordering[] = [
  { shorter: 'bindGraceMs', longer: 'nodeLockExpireMs', why: ', or a bind in progress would count as expired' },
  { shorter: 'bindLockWaitMs', longer: 'bindTimeoutMs', why: ': the lock wait is part of the bind' },
  {
    shorter: 'bindTimeoutMs',
    longer: 'bindGraceMs',
    why: ', or the sweeper could free a lock while its bind still runs',
  },
  { shorter: 'certRenewBeforeMs', longer: 'certValidityMs', why: ', or every certificate would be renewed at once' },
  {
    shorter: 'nodeLockExpireMs',
    longer: 'nodeLockForceAfterMs',
    why: ': forcing applies to locks already past expiry',
  },
];

/**
 * Blames the side the user set: `HAMI_NODELOCK_EXPIRE=30s` alone is a too-short expiry, not a
 * too-long default grace. With both set, the shorter one is named and either may change.
 */
function orderingError(ordering: Ordering, loaded: Loaded): ConfigError {
  const blameLonger = loaded.given[ordering.longer] !== undefined && loaded.given[ordering.shorter] === undefined;
  const [subject, other, relation, fix] = blameLonger
    ? [ordering.longer, ordering.shorter, 'longer than', 'raise it']
    : [ordering.shorter, ordering.longer, 'shorter than', 'lower it'];
  const remedy = loaded.given[other] === undefined ? `${fix} or set ${specOf(other).env}` : 'change one of them';
  return new ConfigError(
    `${describe(subject, loaded)} must be ${relation} ${describe(other, loaded)}${ordering.why}; ${remedy}`,
  );
}

export function checkRelations(loaded: Loaded): void {
  checkExtenderExposure(loaded);
  checkListeners(loaded);
  for (const ordering of ORDERINGS) {
    if (!uses(loaded, ordering.shorter, ordering.longer)) continue;
    const shorter = loaded.values[ordering.shorter];
    const longer = loaded.values[ordering.longer];
    if (typeof shorter === 'number' && typeof longer === 'number' && shorter >= longer)
      throw orderingError(ordering, loaded);
  }
}

/**
 * The extender binds pods, so it is served unauthenticated only on loopback (kube-scheduler on the
 * same machine). Anywhere else it must demand kube-scheduler's client certificate, which is issued
 * from the CA in CERT_SECRET_NAME into a Secret of its own that never holds the CA key.
 */
function checkExtenderExposure(loaded: Loaded): void {
  if (!uses(loaded, 'extenderHost', 'extenderClientAuth', 'extenderClientSecretName', 'certSecretName')) return;
  const config = loaded.values as Partial<Config>;
  if (config.extenderClientAuth !== true && !isLoopbackHost(config.extenderHost ?? '')) {
    throw new ConfigError(
      `${describe('extenderHost', loaded)} is not a loopback address, so EXTENDER_CLIENT_AUTH=true is required: ` +
        `without client certificates anyone who reaches the extender could bind pods`,
    );
  }
  if (config.extenderClientAuth !== true) return;
  if (config.certSecretName === undefined) {
    throw new ConfigError(
      `${describe('extenderClientAuth', loaded)} needs CERT_SECRET_NAME: kube-scheduler's client certificate is ` +
        `issued from the CA kept in that Secret`,
    );
  }
  if (config.extenderClientSecretName === config.certSecretName) {
    const blameCa = loaded.given.extenderClientSecretName === undefined;
    const [subject, other] = blameCa
      ? (['certSecretName', 'extenderClientSecretName'] as const)
      : (['extenderClientSecretName', 'certSecretName'] as const);
    throw new ConfigError(
      `${describe(subject, loaded)} must differ from ${describe(other, loaded)}: kube-scheduler mounts the client ` +
        `Secret and must never see the CA key`,
    );
  }
}

const LISTENERS = [
  { name: 'webhook', host: 'webhookHost', port: 'webhookPort' },
  { name: 'extender', host: 'extenderHost', port: 'extenderPort' },
  { name: 'metrics', host: 'metricsHost', port: 'metricsPort' },
] as const satisfies readonly { name: string; host: SettingKey; port: SettingKey }[];

/** Two listeners on one port would fail at bind time, after part of `serve` has started: refuse now. */
function checkListeners(loaded: Loaded): void {
  const config = loaded.values;
  const active = LISTENERS.filter((listener) => uses(loaded, listener.host, listener.port));
  for (const [index, first] of active.entries()) {
    for (const second of active.slice(index + 1)) {
      const [firstHost, secondHost] = [String(config[first.host]), String(config[second.host])];
      if (config[first.port] !== config[second.port] || !listenAddressesOverlap(firstHost, secondHost)) continue;
      const [subject, other] =
        loaded.given[second.port] === undefined && loaded.given[first.port] !== undefined
          ? [first, second]
          : [second, first];
      throw new ConfigError(
        `${describe(subject.port, loaded)} is also ${describe(other.port, loaded)}: the ${subject.name} and ` +
          `${other.name} listeners cannot share a port ` +
          `on overlapping addresses (${clip(String(config[subject.host]), VALUE_CHARS)} and ` +
          `${clip(String(config[other.host]), VALUE_CHARS)}); choose another port`,
      );
    }
  }
}
