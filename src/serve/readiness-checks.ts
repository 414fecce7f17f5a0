import type { ClusterCache } from '../cluster/cluster-cache.js';
import { Readiness } from '../lifecycle/readiness.js';
import type { LeaderElector } from '../sweeper/leader-election.js';
import type { CertKeeper } from '../tls/cert-keeper.js';
import type { ServingListeners } from './certificates.js';

/**
 * What every listener's /readyz answers: a certificate loaded, each listener answering, the store
 * synced and fresh, leader election able to work.
 */
export function serveReadiness(parts: {
  keeper: CertKeeper;
  listening: ServingListeners;
  cache: ClusterCache;
  elector: LeaderElector | undefined;
}): Readiness {
  const { keeper, listening, cache, elector } = parts;
  const readiness = new Readiness();
  const notAnswering = (listener: { listening: boolean } | undefined): string[] =>
    listener?.listening === true ? [] : ['listener not answering'];
  readiness.add('certificates', () => (keeper.current() === undefined ? ['no serving certificate loaded'] : []));
  readiness.add('webhook', () => notAnswering(listening.webhook));
  readiness.add('extender', () => notAnswering(listening.extender));
  readiness.add('metrics', () => notAnswering(listening.metrics));
  readiness.add('cluster cache', () => cache.problems());
  readiness.add('leader election', () => {
    const problem = elector?.problem();
    return problem === undefined ? [] : [problem];
  });
  return readiness;
}
