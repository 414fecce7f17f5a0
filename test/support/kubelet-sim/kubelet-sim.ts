/**
 * A kubelet for kubelet-less simulated nodes, enough of one for the GPU bind path: it watches pods
 * bound to its nodes, admits them one at a time per node in its own order and at its own pace,
 * calls the device plugin's Allocate for every container that asks for `nvidia.com/gpu` (init
 * containers first, as kubelet does), then reports the pod Running, or Failed with
 * UnexpectedAdmissionError when an Allocate (or its own device bookkeeping) fails. It frees a pod's
 * devices when the pod ends, and finishes graceful deletes as kubelet does (containers terminated,
 * then a DELETE with gracePeriodSeconds 0 and the pod's UID as precondition) unless told not to.
 *
 * What kubelet does that matters here and is kept:
 * - admission is serial per node (kubelet's sync loop), so a stalled Allocate holds up the node;
 * - a pod first seen while it is being deleted is still admitted, Allocate included
 *   (HandlePodAdditions admits any pod whose termination the pod workers do not know of yet);
 * - Allocate carries no pod identity; the plugin has to work out whose devices these are.
 * Randomness comes only from a seeded generator (per node for ordering, per pod for delays), so a
 * run with the same seed, pod names and timings makes the same choices.
 */
import {
  type CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Container,
  type V1Pod,
} from '@kubernetes/client-node';
import type { AllocateRequest, AllocateResponse, PodIdentity } from '@vgpu-warden/stand-ins/hami-plugin';
import { DeviceManager, DevicesUnavailableError } from './device-manager.js';
import { PodFeed } from './pod-feed.js';
import { rejectedStatus, runningStatus, terminatedStatus, UNEXPECTED_ADMISSION_ERROR } from './pod-status.js';
import { hashSeed, seededRandom, type Random } from './seeded-random.js';

/** The device-plugin resource kubelet hands to the plugin's Allocate. */
export const GPU_RESOURCE = 'nvidia.com/gpu';

const strategicPatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

/** What kubelet needs of a device plugin: ListAndWatch's device IDs and Allocate. */
export interface DevicePluginEndpoint {
  listDevices(node: string): Promise<string[]>;
  allocate(request: AllocateRequest): Promise<AllocateResponse>;
  /**
   * ListAndWatch sending a new list for a node (the plugin died or came back). The kubelet then
   * re-reads the list and publishes it as the node's nvidia.com/gpu capacity and allocatable.
   */
  onReportingChange?(listener: (node: string, reporting: boolean) => void): () => void;
}

/**
 * Which admittable pod on a node goes next: the one bound first, the one bound last, or a seeded
 * random one. "Admittable" means its admission delay is over.
 */
export type AdmissionOrder = 'bind-order' | 'latest-first' | 'random';

export interface KubeletSimOptions {
  /** For the pod watch. */
  kubeConfig: KubeConfig;
  /** For the list, status patches and deletes. */
  core: CoreV1Api;
  plugin: DevicePluginEndpoint;
  /** The nodes this kubelet runs (a pod bound elsewhere is none of its business). */
  servesNode: (node: string) => boolean;
  /** Seed of every random choice (default 1). */
  seed?: number;
  order?: AdmissionOrder;
  /**
   * Time from the bind (as this kubelet saw it) to the pod's admission turn, or 'never' (until
   * admitNow). Until its turn the kubelet has not got to the pod at all, as a lagging kubelet: no
   * Allocate, no status, and a graceful delete is not acted on either (its turn deals with it).
   * `random` is the pod's own seeded generator. Default 0 for every pod.
   */
  admitDelayMs?: (pod: V1Pod, random: Random) => number | 'never';
  /** Admit a pod whose deletion has begun by its turn, as kubelet does (default true). */
  admitTerminating?: boolean;
  /**
   * Admit a pod that was deleted from the API before its turn, from the copy last seen: a kubelet
   * whose watch lags handles the ADD before the DELETE (default false).
   */
  admitDeleted?: boolean;
  /**
   * Finish graceful deletes as kubelet does (default true). Off, a plain DELETE only sets
   * deletionTimestamp, as on a node without a kubelet (ARCHITECTURE §8).
   */
  finishGracefulDeletes?: boolean;
  /** Time containers take to stop before the final DELETE (default 0). */
  teardownDelayMs?: number;
  onRecord?: (record: KubeletRecord) => void;
  log?: (line: string) => void;
  clock?: () => Date;
}

/**
 * The kubelet's time line, one record per step of a pod:
 * - bound: first seen bound to one of its nodes (`dueInMs`: its admission delay, or 'never');
 * - admitting: its admission turn began;
 * - admitted: every Allocate succeeded (`devices`: the device IDs it holds);
 * - running: status Running written (not for a pod whose deletion had begun: no container starts);
 * - rejected: an Allocate or the device bookkeeping failed, status Failed/UnexpectedAdmissionError;
 * - terminating / terminated: a graceful delete being finished, or finishPod();
 * - deleted: the pod is gone from the API (its devices freed).
 */
export interface KubeletRecord {
  seq: number;
  at: Date;
  node: string;
  pod: PodIdentity;
  kind: 'bound' | 'admitting' | 'admitted' | 'running' | 'rejected' | 'terminating' | 'terminated' | 'deleted';
  message?: string;
  devices?: string[];
  dueInMs?: number | 'never';
}

type EntryState = 'queued' | 'admitting' | 'running' | 'rejected' | 'terminating' | 'done';

interface PodEntry {
  identity: PodIdentity;
  node: string;
  /** The latest copy seen. */
  pod: V1Pod;
  boundSeq: number;
  dueAt: number | 'never';
  state: EntryState;
  /** Deleted from the API. */
  gone: boolean;
  /** The pod has been admitted (containers started), for the terminal status. */
  started: boolean;
  tearingDown: boolean;
  /** A status the API refused for a transient reason, waiting for its retry (the latest wins). */
  unwrittenStatus?: object;
  /** A retry of the status is scheduled. */
  statusRetrying?: boolean;
}

/** kubelet's status manager retries a status the API did not take; so do we, this far apart at most. */
const STATUS_RETRY_FIRST_MS = 200;
const STATUS_RETRY_MAX_MS = 5000;

interface NodeState {
  queue: PodEntry[];
  busy: boolean;
  timer: NodeJS.Timeout | undefined;
  random: Random;
  /** kubelet's device bookkeeping, once the plugin's device list is in. */
  devices: DeviceManager | undefined;
  loading: Promise<DeviceManager> | undefined;
}

function identityOf(pod: V1Pod): PodIdentity {
  return { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' };
}

function isTerminal(pod: V1Pod): boolean {
  return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
}

function isDeleting(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined;
}

/** Device-plugin resources are integers, limits equal to requests; kubelet reads the limit. */
function gpuCount(container: V1Container): number {
  const text = container.resources?.limits?.[GPU_RESOURCE] ?? container.resources?.requests?.[GPU_RESOURCE];
  const count = text === undefined ? 0 : Number(text);
  return Number.isInteger(count) && count > 0 ? count : 0;
}

function httpStatus(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A stable fake node address. */
function hostIpOf(node: string): string {
  const hash = hashSeed(node);
  return `10.${(hash >>> 16) & 0xff}.${(hash >>> 8) & 0xff}.${(hash & 0xfe) + 1}`;
}

export class KubeletSim {
  private readonly feed: PodFeed;
  private readonly entries = new Map<string, PodEntry>();
  private readonly nodes = new Map<string, NodeState>();
  private readonly incarnations = new Map<string, number>();
  private readonly history: KubeletRecord[] = [];
  private readonly clock: () => Date;
  private readonly seed: number;
  private readonly unsubscribe: () => void;
  /** Per node, the publication of its device count in progress (they run one after another). */
  private readonly publishing = new Map<string, Promise<void>>();
  private boundSeq = 0;
  private stopped = false;

  constructor(private readonly options: KubeletSimOptions) {
    this.clock = options.clock ?? (() => new Date());
    this.seed = options.seed ?? 1;
    this.feed = new PodFeed({
      kubeConfig: options.kubeConfig,
      core: options.core,
      handlers: {
        upsert: (pod) => {
          this.onUpsert(pod);
        },
        remove: (pod) => {
          this.onRemove(pod);
        },
      },
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    this.unsubscribe =
      options.plugin.onReportingChange?.((node) => {
        if (options.servesNode(node)) void this.publishDevices(node);
      }) ?? (() => undefined);
  }

  /**
   * Re-reads the plugin's device list for `node` and publishes its length as the node's
   * `nvidia.com/gpu` capacity and allocatable (kubelet's node status sync after ListAndWatch).
   * Resolves once the status is written; calls for one node run in order.
   */
  publishDevices(node: string): Promise<void> {
    const previous = this.publishing.get(node) ?? Promise.resolve();
    const next = previous
      .then(async () => {
        if (this.stopped) return;
        const ids = await this.options.plugin.listDevices(node);
        const state = this.nodeState(node);
        if (state.devices === undefined) state.devices = new DeviceManager(GPU_RESOURCE, ids);
        else state.devices.replaceDevices(ids);
        const count = String(ids.length);
        await this.options.core.patchNodeStatus(
          {
            name: node,
            body: { status: { capacity: { [GPU_RESOURCE]: count }, allocatable: { [GPU_RESOURCE]: count } } },
          },
          strategicPatch,
        );
        this.options.log?.(`kubelet ${node}: ${GPU_RESOURCE} allocatable ${count}`);
      })
      .catch((error: unknown) => {
        this.options.log?.(`kubelet ${node}: publishing devices failed: ${describe(error)}`);
      });
    this.publishing.set(node, next);
    return next;
  }

  /** Resolves once the first LIST of bound pods has been taken in. */
  start(): Promise<void> {
    return this.feed.start();
  }

  /** Stops watching and admitting; an Allocate in flight is not waited for (it may be stalled). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    for (const node of this.nodes.values()) if (node.timer !== undefined) clearTimeout(node.timer);
    await this.feed.stop();
  }

  get records(): readonly KubeletRecord[] {
    return this.history;
  }

  /** The records of one pod (by namespace and name: every incarnation), in order. */
  recordsOf(namespace: string, name: string): KubeletRecord[] {
    return this.history.filter((record) => record.pod.namespace === namespace && record.pod.name === name);
  }

  /**
   * Ends the wait of a queued pod (held with 'never', or still in its delay): it is admitted in its
   * turn from now. False when no pod of that name is queued. This is how a test or a chaos run lets
   * a lagging kubelet catch up at a moment of its choosing.
   */
  admitNow(namespace: string, name: string): boolean {
    const entry = [...this.entries.values()].find(
      (candidate) =>
        candidate.identity.namespace === namespace && candidate.identity.name === name && candidate.state === 'queued',
    );
    if (entry === undefined) return false;
    entry.dueAt = this.clock().getTime();
    this.pump(entry.node);
    return true;
  }

  /** The containers of a running pod exit (0: Succeeded, else Failed); its devices are freed. */
  async finishPod(namespace: string, name: string, exitCode = 0): Promise<void> {
    const entry = [...this.entries.values()].find(
      (candidate) =>
        candidate.identity.namespace === namespace && candidate.identity.name === name && candidate.state === 'running',
    );
    if (entry === undefined) throw new Error(`kubelet sim: no running pod ${namespace}/${name}`);
    entry.state = 'done';
    await this.patchStatus(entry, terminatedStatus(entry.pod, this.clock(), exitCode, true));
    this.freeDevices(entry);
    this.note(entry, 'terminated', { message: `containers exited with ${exitCode}` });
  }

  private note(
    entry: PodEntry,
    kind: KubeletRecord['kind'],
    extra: Partial<Pick<KubeletRecord, 'message' | 'devices' | 'dueInMs'>> = {},
  ): void {
    const record: KubeletRecord = {
      seq: this.history.length + 1,
      at: this.clock(),
      node: entry.node,
      pod: entry.identity,
      kind,
      ...extra,
    };
    this.history.push(record);
    this.options.log?.(
      `kubelet ${entry.node}: ${entry.identity.namespace}/${entry.identity.name} ${kind}${extra.message === undefined ? '' : `: ${extra.message}`}`,
    );
    try {
      this.options.onRecord?.(record);
    } catch {
      // An observer must not change what the kubelet does.
    }
  }

  private nodeState(node: string): NodeState {
    let state = this.nodes.get(node);
    if (state === undefined) {
      state = {
        queue: [],
        busy: false,
        timer: undefined,
        random: seededRandom(hashSeed(this.seed, 'node', node)),
        devices: undefined,
        loading: undefined,
      };
      this.nodes.set(node, state);
    }
    return state;
  }

  private onUpsert(pod: V1Pod): void {
    const node = pod.spec?.nodeName;
    if (this.stopped || node === undefined || node === '' || !this.options.servesNode(node)) return;
    const identity = identityOf(pod);
    let entry = this.entries.get(identity.uid);
    if (entry === undefined) {
      // A pod already over, or already running (this kubelet restarted), needs no admission.
      if (isTerminal(pod)) return;
      entry = {
        identity,
        node,
        pod,
        boundSeq: ++this.boundSeq,
        dueAt: 'never',
        state: 'queued',
        gone: false,
        started: false,
        tearingDown: false,
      };
      this.entries.set(identity.uid, entry);
      if (pod.status?.phase === 'Running') {
        entry.state = 'running';
        entry.started = true;
      } else {
        this.enqueue(entry);
      }
    } else {
      entry.pod = pod;
    }
    if (isTerminal(pod) && (entry.state === 'queued' || entry.state === 'running')) {
      this.dequeue(entry);
      entry.state = 'done';
      this.freeDevices(entry);
      return;
    }
    if (isDeleting(pod)) this.onDeleting(entry);
  }

  private enqueue(entry: PodEntry): void {
    const key = `${entry.identity.namespace}/${entry.identity.name}`;
    const incarnation = (this.incarnations.get(key) ?? 0) + 1;
    this.incarnations.set(key, incarnation);
    const random = seededRandom(hashSeed(this.seed, 'pod', key, incarnation));
    const delay = this.options.admitDelayMs?.(entry.pod, random) ?? 0;
    entry.dueAt = delay === 'never' ? 'never' : this.clock().getTime() + Math.max(0, delay);
    this.note(entry, 'bound', { dueInMs: delay });
    this.nodeState(entry.node).queue.push(entry);
    this.pump(entry.node);
  }

  private dequeue(entry: PodEntry): void {
    const state = this.nodes.get(entry.node);
    if (state === undefined) return;
    const index = state.queue.indexOf(entry);
    if (index >= 0) state.queue.splice(index, 1);
  }

  private onDeleting(entry: PodEntry): void {
    // A queued pod is one this kubelet has not got to yet (its delay models kubelet lag): its turn
    // deals with the deletion. While admitting, the admission's end does.
    if (entry.state === 'running' || entry.state === 'rejected' || entry.state === 'done') this.tearDown(entry);
  }

  private onRemove(pod: V1Pod): void {
    const identity = identityOf(pod);
    const entry = this.entries.get(identity.uid);
    if (entry === undefined) return;
    entry.gone = true;
    entry.pod = pod;
    this.freeDevices(entry);
    this.note(entry, 'deleted');
    if (entry.state === 'queued' && this.options.admitDeleted === true) return;
    this.dequeue(entry);
    if (entry.state !== 'admitting') entry.state = 'done';
    this.entries.delete(identity.uid);
  }

  /** Runs the node's admissions one at a time, in the configured order, each at its due time. */
  private pump(node: string): void {
    const state = this.nodeState(node);
    if (state.busy || this.stopped) return;
    if (state.timer !== undefined) {
      clearTimeout(state.timer);
      state.timer = undefined;
    }
    state.busy = true;
    // From the next turn of the event loop: pods that became due together (one watch batch, or
    // several admitNow calls) are then all candidates, and the order decides among them.
    void new Promise<void>((resolve) => {
      setImmediate(resolve);
    })
      .then(() => this.drain(node, state))
      .finally(() => {
        state.busy = false;
        // Pods bound while the last admission ran, or whose delay ended meanwhile.
        if (state.queue.some((entry) => entry.dueAt !== 'never' && entry.dueAt <= this.clock().getTime()))
          this.pump(node);
      });
  }

  private async drain(node: string, state: NodeState): Promise<void> {
    while (!this.stopped) {
      const now = this.clock().getTime();
      const ready = state.queue.filter((entry) => entry.dueAt !== 'never' && entry.dueAt <= now);
      if (ready.length === 0) {
        const next = Math.min(...state.queue.map((entry) => (entry.dueAt === 'never' ? Infinity : entry.dueAt)));
        if (Number.isFinite(next)) {
          state.timer = setTimeout(
            () => {
              state.timer = undefined;
              this.pump(node);
            },
            Math.max(1, next - now),
          );
        }
        return;
      }
      const entry = this.pick(ready, state.random);
      this.dequeue(entry);
      try {
        await this.admit(entry);
      } catch (error) {
        this.options.log?.(
          `kubelet ${node}: admitting ${entry.identity.namespace}/${entry.identity.name} threw: ${describe(error)}`,
        );
      }
    }
  }

  private pick(ready: PodEntry[], random: Random): PodEntry {
    const sorted = [...ready].sort((a, b) => a.boundSeq - b.boundSeq);
    switch (this.options.order ?? 'bind-order') {
      case 'latest-first':
        return sorted[sorted.length - 1] as PodEntry;
      case 'random':
        return sorted[Math.floor(random() * sorted.length)] as PodEntry;
      default:
        return sorted[0] as PodEntry;
    }
  }

  /** The node's device bookkeeping, made from the plugin's device list the first time it is needed. */
  private async deviceManager(node: string): Promise<DeviceManager> {
    const state = this.nodeState(node);
    if (state.devices !== undefined) return state.devices;
    state.loading ??= this.options.plugin.listDevices(node).then((ids) => new DeviceManager(GPU_RESOURCE, ids));
    try {
      state.devices = await state.loading;
      return state.devices;
    } finally {
      // A failed ListAndWatch is asked again at the next admission.
      state.loading = undefined;
    }
  }

  private async admit(entry: PodEntry): Promise<void> {
    if (entry.gone && this.options.admitDeleted !== true) return;
    const pod = entry.pod;
    if (isDeleting(pod) && this.options.admitTerminating === false) {
      this.tearDown(entry);
      return;
    }
    entry.state = 'admitting';
    const late = entry.gone
      ? 'already deleted from the API (admitted from the copy last seen)'
      : isDeleting(pod)
        ? 'deletion already begun'
        : undefined;
    this.note(entry, 'admitting', late === undefined ? {} : { message: late });
    const containers = [
      ...(pod.spec?.initContainers ?? []).map((container) => ({ container, init: true })),
      ...(pod.spec?.containers ?? []).map((container) => ({ container, init: false })),
    ].filter(({ container }) => gpuCount(container) > 0);
    let failure: string | undefined;
    if (containers.length > 0) {
      try {
        const devices = await this.deviceManager(entry.node);
        for (const { container, init } of containers) {
          const deviceIds = devices.take(entry.identity.uid, gpuCount(container), init);
          try {
            await this.options.plugin.allocate({
              node: entry.node,
              admitted: entry.identity,
              container: container.name,
              deviceIds,
            });
          } catch (error) {
            const code = (error as { code?: unknown } | null)?.code;
            failure = `rpc error: code = ${typeof code === 'string' ? code : 'Unknown'} desc = ${describe(error)}`;
            break;
          }
        }
      } catch (error) {
        failure =
          error instanceof DevicesUnavailableError ? error.message : `listing devices failed: ${describe(error)}`;
      }
    }
    if (failure !== undefined) {
      entry.state = 'rejected';
      this.freeDevices(entry);
      const message = `Allocate failed due to ${failure}, which is unexpected`;
      this.note(entry, 'rejected', { message });
      await this.patchStatus(entry, rejectedStatus(UNEXPECTED_ADMISSION_ERROR, message));
    } else {
      entry.state = 'running';
      this.note(entry, 'admitted', { devices: this.heldDevices(entry) });
      // The pod workers start no container of a pod whose deletion has begun (or that is gone).
      if (!isDeleting(entry.pod) && !entry.gone) {
        entry.started = true;
        await this.patchStatus(entry, runningStatus(pod, this.clock(), hostIpOf(entry.node)));
        this.note(entry, 'running');
      }
    }
    if (entry.gone) {
      // Admitted from a stale copy: the pod is gone, so are its containers.
      this.freeDevices(entry);
      entry.state = 'done';
      this.entries.delete(entry.identity.uid);
    } else if (isDeleting(entry.pod)) {
      this.tearDown(entry);
    }
  }

  private heldDevices(entry: PodEntry): string[] {
    return this.nodes.get(entry.node)?.devices?.heldBy(entry.identity.uid) ?? [];
  }

  private freeDevices(entry: PodEntry): void {
    this.nodes.get(entry.node)?.devices?.free(entry.identity.uid);
  }

  /** A graceful delete, finished as kubelet does; or nothing, when the option says no kubelet finishes it. */
  private tearDown(entry: PodEntry): void {
    if (entry.tearingDown || entry.gone || this.options.finishGracefulDeletes === false) return;
    entry.tearingDown = true;
    const started = entry.started;
    // A pod already Failed or Succeeded (rejected, finished) keeps its status; it only goes away.
    const ended = entry.state === 'rejected' || entry.state === 'done' || isTerminal(entry.pod);
    entry.state = 'terminating';
    this.note(entry, 'terminating');
    void (async () => {
      const delay = this.options.teardownDelayMs ?? 0;
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      if (this.stopped) return;
      if (!ended) await this.patchStatus(entry, terminatedStatus(entry.pod, this.clock(), 0, started));
      this.freeDevices(entry);
      this.note(entry, 'terminated');
      try {
        await this.options.core.deleteNamespacedPod({
          name: entry.identity.name,
          namespace: entry.identity.namespace,
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid: entry.identity.uid } },
        });
      } catch (error) {
        // Gone already, or another incarnation now has the name: nothing of ours to delete.
        const status = httpStatus(error);
        if (status !== 404 && status !== 409)
          this.options.log?.(
            `kubelet ${entry.node}: deleting ${entry.identity.namespace}/${entry.identity.name} failed: ${describe(error)}`,
          );
      }
    })();
  }

  /**
   * Writes the pod's status. A transient failure (the apiserver down, a 5xx) is retried in the
   * background, as kubelet's status manager does, with the latest status the pod was given: a pod
   * rejected while the apiserver was away still ends Failed. 404 (gone) and 409 (another
   * incarnation) end it.
   */
  private async patchStatus(entry: PodEntry, body: object): Promise<void> {
    if (this.stopped || entry.gone) return;
    if (entry.statusRetrying === true) {
      // A retry is pending: it writes this status instead of the older one, in order.
      entry.unwrittenStatus = body;
      return;
    }
    if (!(await this.writeStatus(entry, body))) this.retryStatus(entry, body, STATUS_RETRY_FIRST_MS);
  }

  /** True when written or not worth retrying. */
  private async writeStatus(entry: PodEntry, body: object): Promise<boolean> {
    try {
      await this.options.core.patchNamespacedPodStatus(
        {
          name: entry.identity.name,
          namespace: entry.identity.namespace,
          body: { metadata: { uid: entry.identity.uid }, ...body },
        },
        strategicPatch,
      );
      return true;
    } catch (error) {
      const status = httpStatus(error);
      if (status === 404 || status === 409) return true;
      this.options.log?.(
        `kubelet ${entry.node}: status of ${entry.identity.namespace}/${entry.identity.name} not written: ${describe(error)}; retrying`,
      );
      return false;
    }
  }

  private retryStatus(entry: PodEntry, body: object, delayMs: number): void {
    entry.statusRetrying = true;
    entry.unwrittenStatus = body;
    const timer = setTimeout(() => {
      void (async () => {
        // patchStatus may replace the pending status while the write below is in flight.
        const pending = (): object | undefined => entry.unwrittenStatus;
        const latest = pending() ?? body;
        entry.unwrittenStatus = undefined;
        if (this.stopped || entry.gone) {
          entry.statusRetrying = false;
          return;
        }
        const written = await this.writeStatus(entry, latest);
        const newer = pending();
        if (!written || newer !== undefined) {
          this.retryStatus(
            entry,
            newer ?? latest,
            written ? STATUS_RETRY_FIRST_MS : Math.min(delayMs * 2, STATUS_RETRY_MAX_MS),
          );
          return;
        }
        entry.statusRetrying = false;
      })();
    }, delayMs);
    timer.unref();
  }
}
