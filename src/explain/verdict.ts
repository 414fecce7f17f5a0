import { formatAge } from '../base/human-age.js';
import type { Explanation, LockEntry, Situation } from './explanation.js';
import { reasonSummary } from './placement.js';
import { lockWaitNode, unacknowledgedIn } from './pod-events.js';

type Parts = Omit<Explanation, 'verdict' | 'situation'>;

export interface VerdictContext {
  /** The scheduler name the webhook writes (SCHEDULER_NAME). */
  ourScheduler: string;
  lastBindEvent: { reason: string; message: string } | undefined;
}

interface Verdict {
  verdict: string;
  situation: Situation;
}

const GPUS_SHOWN = 3;

/** "team-a/x (awaiting-allocation, 40s)": the holder and the lock's state as the lock rules classify it. */
export function lockText(lock: LockEntry): string {
  const holder = lock.holder === null ? `a ${lock.kind} value` : `${lock.holder.namespace}/${lock.holder.name}`;
  const age = formatAge(lock.ageSeconds ?? undefined);
  const state = lock.state === 'held' ? lock.reason : `${lock.state}: ${lock.reason}`;
  return `${holder} (${state}, ${age})`;
}

function nodes(count: number): string {
  return `${count} ${count === 1 ? 'node' : 'nodes'}`;
}

/** "GPU-a (12000 MiB, 30% cores), GPU-b (...)": the GPUs bind gave the pod, first few. */
function gpuList(parts: Parts): string {
  const allocated = parts.bind.allocated;
  if (allocated === null) return 'no hami.io/vgpu-devices-allocated';
  if ('error' in allocated) return `unreadable hami.io/vgpu-devices-allocated (${allocated.error})`;
  const gpus = allocated.containers.flatMap((container) => container.gpus);
  const shown = gpus.slice(0, GPUS_SHOWN).map((gpu) => `${gpu.uuid} (${gpu.memoryMiB} MiB, ${gpu.cores}% cores)`);
  return gpus.length > GPUS_SHOWN ? `${shown.join(', ')} and ${gpus.length - GPUS_SHOWN} more` : shown.join(', ');
}

function progressText(parts: Parts): string {
  const progress = parts.bind.progress;
  return progress === null ? 'progress unknown' : `${progress.done}/${progress.total} containers allocated`;
}

function boundVerdict(parts: Parts, node: string): Verdict {
  const own = parts.locks.find((lock) => lock.relation === 'held-by-this-pod' && lock.node === node);
  switch (parts.bind.phase) {
    case 'success':
      return { situation: 'allocated', verdict: `allocated on ${node}: ${gpuList(parts)}` };
    case 'failed':
      return {
        situation: 'allocation-failed',
        verdict: `allocation failed on ${node}: the device plugin set hami.io/bind-phase=failed`,
      };
    case 'allocating': {
      if (own?.state === 'stalled') {
        return {
          situation: 'allocation-stalled',
          verdict:
            `bound to ${node}, allocation stalled: its lock is ${formatAge(own.ageSeconds ?? undefined)} ` +
            `old, past NODELOCK_EXPIRE, and the device plugin has not finished (${progressText(parts)})`,
        };
      }
      const lock =
        own === undefined ? `; no lock on ${node} names it` : `, lock held ${formatAge(own.ageSeconds ?? undefined)}`;
      return { situation: 'bound-allocating', verdict: `bound to ${node}, allocating (${progressText(parts)}${lock})` };
    }
    default:
      return parts.pod.requests.length === 0
        ? { situation: 'not-a-gpu-pod', verdict: `bound to ${node}; requests no GPU` }
        : {
            situation: 'bound-without-allocation',
            verdict: `bound to ${node} without vgpu-warden's GPU annotations: it was not placed by the extender's bind`,
          };
  }
}

function waitingVerdict(parts: Parts): Verdict | undefined {
  const placement = parts.placement;
  const waited = parts.locks.find((lock) => lock.relation === 'waited-for');
  // Without a NodeLockWait event a bind still waits wherever it goes when every node it fits is locked.
  const everyFitLocked =
    placement !== null && placement.fitting.count > 0 && placement.fitting.count === placement.lockedFitting.length;
  const blocking =
    waited ?? (everyFitLocked ? parts.locks.find((lock) => lock.relation === 'on-a-fitting-node') : undefined);
  if (blocking === undefined) return undefined;
  return {
    situation: 'waiting-for-lock',
    verdict: `waiting for the lock on ${blocking.node} held by ${lockText(blocking)}`,
  };
}

function pendingVerdict(parts: Parts, context: VerdictContext): Verdict {
  const { placement, pod } = parts;
  if (placement === null)
    return { situation: 'not-a-gpu-pod', verdict: 'Pending, requests no GPU: vgpu-warden does not place it' };
  if (placement.error !== null)
    return { situation: 'unreadable-request', verdict: `Pending: ${placement.error} (filter refuses the pod)` };
  if (pod.schedulerName !== context.ourScheduler) {
    return {
      situation: 'other-scheduler',
      verdict:
        `Pending: spec.schedulerName is ${JSON.stringify(pod.schedulerName ?? '')}, not ` +
        `${context.ourScheduler}, so vgpu-warden's extender never sees it`,
    };
  }
  if (placement.fitting.count === 0) {
    const why = placement.evaluated === 0 ? 'the cluster has no nodes' : reasonSummary(placement);
    return { situation: 'fits-nowhere', verdict: `Pending: fits no node (${why})` };
  }
  const waiting = waitingVerdict(parts);
  if (waiting !== undefined) return waiting;
  const unacknowledged = unacknowledgedIn(context.lastBindEvent);
  const waitedNode = lockWaitNode(context.lastBindEvent);
  if (unacknowledged !== undefined && waitedNode !== undefined) {
    return {
      situation: 'waiting-for-kubelet',
      verdict:
        `Pending: ${waitedNode}'s lock is free, but its kubelet has not acknowledged ${unacknowledged}'s ` +
        `allocation yet (no status.startTime): restarted now, it would call Allocate for that pod again and be ` +
        `served this pod's GPUs, so the bind waits`,
    };
  }
  if (context.lastBindEvent?.reason === 'BindingFailed') {
    const { message } = context.lastBindEvent;
    return {
      situation: 'bind-failed',
      verdict: `Pending: fits ${nodes(placement.fitting.count)}; the last bind failed: ${message}`,
    };
  }
  const more = placement.fitting.count > placement.fitting.nodes.length ? ', …' : '';
  return {
    situation: 'schedulable',
    verdict:
      `Pending: fits ${nodes(placement.fitting.count)} (${placement.fitting.nodes.join(', ')}${more}); ` +
      `waiting for kube-scheduler to bind it`,
  };
}

/** The one line explain prints first, and the situation it names. Pure. */
export function verdictOf(parts: Parts, context: VerdictContext): Verdict {
  const { pod } = parts;
  let verdict: Verdict;
  if (pod.phase === 'Succeeded' || pod.phase === 'Failed') {
    verdict = { situation: 'finished', verdict: `finished: ${pod.phase}${pod.node === null ? '' : ` on ${pod.node}`}` };
  } else {
    verdict = pod.node === null ? pendingVerdict(parts, context) : boundVerdict(parts, pod.node);
  }
  return pod.deleting ? { ...verdict, verdict: `being deleted; ${verdict.verdict}` } : verdict;
}
