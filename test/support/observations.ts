import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { BIND_PHASE_ANNOTATION, NODE_LOCK_ANNOTATION } from '../../src/hami/wire.js';

/**
 * One-line descriptions of cluster objects for `notYet(...)`: what a wait saw last, so that a
 * timeout names the step that never happened (unbound, bound but not allocated, locked by whom).
 */

/** `Pending, unbound, bind-phase allocating, deleting` and the like. */
export function describePod(pod: V1Pod): string {
  const parts = [
    pod.status?.phase ?? 'no phase',
    pod.spec?.nodeName === undefined ? 'unbound' : `on ${pod.spec.nodeName}`,
  ];
  const bindPhase = pod.metadata?.annotations?.[BIND_PHASE_ANNOTATION];
  if (bindPhase !== undefined) parts.push(`bind-phase ${bindPhase}`);
  if (pod.metadata?.deletionTimestamp !== undefined) parts.push('deleting');
  const waiting = (pod.status?.containerStatuses ?? []).flatMap((status) =>
    status.state?.waiting?.reason === undefined ? [] : [status.state.waiting.reason],
  );
  if (waiting.length > 0) parts.push(`waiting: ${waiting.join(', ')}`);
  return parts.join(', ');
}

/** The newest `count` events on the object, oldest first, as `Reason: message`. */
export async function describeEvents(core: CoreV1Api, namespace: string, name: string, count = 3): Promise<string> {
  const events = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items;
  const time = (event: (typeof events)[number]) =>
    new Date(event.lastTimestamp ?? event.eventTime ?? event.metadata.creationTimestamp ?? 0).getTime();
  const newest = events.sort((a, b) => time(a) - time(b)).slice(-count);
  return newest.length === 0
    ? 'no events'
    : newest.map((event) => `${event.reason ?? '?'}: ${(event.message ?? '').slice(0, 400)}`).join(' | ');
}

/** The node's HAMi lock annotation, or `unlocked` / `node not found`. */
export async function describeNodeLock(core: CoreV1Api, node: string): Promise<string> {
  try {
    const lock = (await core.readNode({ name: node })).metadata?.annotations?.[NODE_LOCK_ANNOTATION];
    return lock === undefined ? `${node} unlocked` : `${node} locked ${lock}`;
  } catch {
    return `${node} not found`;
  }
}

/** The pod (or that it is gone), its newest events and, once bound, its node's lock. */
export async function podStory(core: CoreV1Api, namespace: string, name: string, pod?: V1Pod): Promise<string> {
  let current = pod;
  if (current === undefined) {
    try {
      current = await core.readNamespacedPod({ namespace, name });
    } catch {
      return `pod ${namespace}/${name} not found; events: ${await describeEvents(core, namespace, name)}`;
    }
  }
  const node = current.spec?.nodeName;
  const lock = node === undefined ? '' : `; ${await describeNodeLock(core, node)}`;
  return `pod ${name}: ${describePod(current)}${lock}; events: ${await describeEvents(core, namespace, name)}`;
}

/** How much a process has logged and its last line: what a wait for a log line saw. */
export function outputTail(output: string): string {
  const lines = output
    .trimEnd()
    .split('\n')
    .filter((line) => line !== '');
  return `${lines.length} log lines${lines.length === 0 ? '' : `, the last: ${(lines.at(-1) ?? '').slice(0, 300)}`}`;
}
