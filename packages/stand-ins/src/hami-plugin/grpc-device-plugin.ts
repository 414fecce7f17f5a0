/**
 * The HAMi stand-in speaking kubelet's real device-plugin API (v1beta1 gRPC, ./proto/api.proto) for
 * ONE node, as HAMi's NVIDIA device plugin v2.10 does (../shared/reference/real-nodes.md "HAMi's own
 * NVIDIA device plugin v2.10", hami-wire-contract.md §5). The HAMi logic stays in HamiDevicePlugin
 * (device-plugin.ts); this is the transport and the process life cycle around it:
 *
 * - serves the DevicePlugin service on `<pluginDir>/<socketName>` (a unix socket; a stale one is
 *   removed first), then calls kubelet's Registration.Register on `<pluginDir>/kubelet.sock` with
 *   version v1beta1, endpoint = socketName, the resource name and options {pre_start_required:
 *   false, get_preferred_allocation_available}; it retries until kubelet.sock exists and answers;
 * - re-registers when kubelet restarts: kubelet deletes the plugin's socket and recreates
 *   kubelet.sock; the folder is watched (inotify, as HAMi's fsnotify) so the socket is served again
 *   and Register called again at once; a check every `checkMs` catches a missed event. As HAMi
 *   restarts its plugin on a new kubelet.sock, every Register after the first comes from a freshly
 *   served socket, and only once the kubelet connected to the old one has had `settleMs` to see its
 *   stream end. kubelet 1.37 keeps its clients per socket path and refuses a Register for a path it
 *   still holds ("device plugin already connected"); worse, that refusal forgets the client it
 *   holds, whose end then never marks the devices unhealthy, and every later Register of that path
 *   is refused until kubelet restarts (real-nodes.md). A second Register on a live connection, or
 *   one racing the end of the previous, must never happen;
 * - ListAndWatch sends the node's replica IDs `<uuid>-<i>` (Healthy, or Unhealthy for a GPU the
 *   inventory marks unhealthy) at once and again whenever the list changes (the node inventory is
 *   polled every `pollMs`, and re-read on `refresh()`);
 * - Allocate: each container request goes to HamiDevicePlugin.allocate with kubelet's device IDs
 *   and no pod identity (the RPC carries none); the answer is ContainerAllocateResponse.envs with
 *   HAMi's environment (NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>, CUDA_DEVICE_SM_LIMIT,
 *   CUDA_DEVICE_MEMORY_SHARED_CACHE, LIBCUDA_LOG_LEVEL). No mounts and no device specs: the
 *   stand-in has no libvgpu.so, /etc/ld.so.preload or /tmp/vgpulock to mount (HAMi mounts those),
 *   and HAMi passes no /dev/nvidiaN specs by default. An AllocateError becomes a gRPC error
 *   (UNKNOWN, or UNAVAILABLE for its 'Unavailable' code) with its message, so kubelet rejects the
 *   pod with UnexpectedAdmissionError. Several container requests in one RPC (kubelet sends one)
 *   are allocated one after the other;
 * - GetPreferredAllocation: HamiDevicePlugin.preferredAllocation (the pending pod's annotated
 *   GPUs, else kubelet's must-include and first available); PreStartContainer answers empty.
 *
 * Failure modes: `stop()` is the plugin process dying (server closed, socket removed, so kubelet's
 * ListAndWatch breaks and allocatable drops to 0 at once; a call queued or stalled by the plugin's
 * `behaviour` is cut, and kubelet gets an error); `restart()` is stop + start (serve, register);
 * `registerTwice` registers twice per registration; `neverRegister` serves without registering.
 * With `followReporting` (default), HamiDevicePlugin.stopReporting(node) stops this server and
 * reportAgain(node) starts it again, so the simulator's "plugin down" control means the same here.
 */
import { existsSync, statSync, watch, type FSWatcher } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  Client,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type sendUnaryData,
  type ServerErrorResponse,
  type ServerUnaryCall,
  type ServerWritableStream,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { AllocateError, type Admission, type HamiDevicePlugin, type KubeletDevice } from './device-plugin.js';
import {
  API_VERSION,
  devicePluginMethod,
  devicePluginService,
  KUBELET_SOCKET,
  type AllocateRequest,
  type AllocateResponse,
  type ContainerAllocateResponse,
  type DevicePluginOptions,
  type Empty,
  type ListAndWatchResponse,
  type PreferredAllocationRequest,
  type PreferredAllocationResponse,
  type PreStartContainerRequest,
  type PreStartContainerResponse,
  type RegisterRequest,
} from './grpc-api.js';

/** HAMi's resource and socket for NVIDIA GPUs (the socket name of NVIDIA's plugin, which HAMi keeps). */
export const DEFAULT_RESOURCE_NAME = 'nvidia.com/gpu';
export const DEFAULT_SOCKET_NAME = 'nvidia-gpu.sock';

/** How many of its own log lines a plugin keeps for recentLines(). */
const RECENT_LINES = 30;

/** Linux sun_path holds 108 bytes, NUL included. */
const MAX_SOCKET_PATH = 107;

export interface GrpcDevicePluginServerOptions {
  /**
   * `new HamiDevicePlugin<Admission>(...)`: its requests and records have no `admitted` pod, since
   * kubelet's Allocate RPC carries no pod identity. One plugin may serve several nodes' servers.
   */
  plugin: HamiDevicePlugin<Admission>;
  /** The node this plugin process runs on (HAMi's NODE_NAME). */
  node: string;
  /** Host path of the node's kubelet device-plugin folder, where kubelet.sock lives. */
  pluginDir: string;
  /** Default nvidia.com/gpu. */
  resourceName?: string;
  /** Default nvidia-gpu.sock. */
  socketName?: string;
  /** get_preferred_allocation_available (default true, as HAMi's §5). */
  preferredAllocation?: boolean;
  /** Register twice per registration (the second answer is only logged). */
  registerTwice?: boolean;
  /** Serve the socket but never call Register. */
  neverRegister?: boolean;
  /** Stop and start with HamiDevicePlugin.stopReporting / reportAgain of this node (default true). */
  followReporting?: boolean;
  /** How often ListAndWatch re-reads the node inventory (default 1000 ms). */
  pollMs?: number;
  /** Wait between failed Register attempts while kubelet.sock is missing or refuses (default 200 ms). */
  retryMs?: number;
  /** Deadline of one Register call (default 5000 ms). */
  registerTimeoutMs?: number;
  /** Safety-net check of the two sockets, in case a folder event was missed (default 1000 ms). */
  checkMs?: number;
  /**
   * After serving anew while kubelet was connected, the wait before Register, for kubelet to see its
   * stream end (default 200 ms).
   */
  settleMs?: number;
  log?: (line: string) => void;
  onEvent?: (event: GrpcPluginEvent) => void;
}

export type GrpcPluginEvent =
  | { kind: 'serving'; socket: string }
  | { kind: 'registered'; count: number }
  | { kind: 'register-failed'; error: string }
  | { kind: 'devices-sent'; devices: number; healthy: number }
  | { kind: 'rpc'; method: DevicePluginMethod }
  | { kind: 'stopped' };

export type DevicePluginMethod =
  'GetDevicePluginOptions' | 'ListAndWatch' | 'GetPreferredAllocation' | 'Allocate' | 'PreStartContainer';

/** One life of the plugin process: from start to stop. */
interface Incarnation {
  readonly controller: AbortController;
  server: Server | undefined;
  watcher: FSWatcher | undefined;
  timer: NodeJS.Timeout | undefined;
  needServe: boolean;
  needRegister: boolean;
  /** A serve is under way (its own socket events are not kubelet's). */
  serving: boolean;
  /** kubelet.sock as it was when Register last succeeded (`<ino>:<ctime>`). */
  registeredTo: string | undefined;
  /** A kick that came while the loop was busy. */
  kicked: boolean;
  wake: (() => void) | undefined;
  loop: Promise<void>;
  /** Cleanups of the open ListAndWatch streams, and their refreshers. */
  readonly streams: Map<() => void, () => Promise<void>>;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Identity of a file: inode and change time, so a re-created kubelet.sock is told apart. */
function stampOf(path: string): string | undefined {
  try {
    const stat = statSync(path, { bigint: true });
    return `${String(stat.ino)}:${String(stat.ctimeNs)}`;
  } catch {
    return undefined;
  }
}

function grpcError(code: status, message: string): ServerErrorResponse {
  return Object.assign(new Error(message), { code, details: message });
}

function codeOf(error: unknown): status {
  return error instanceof AllocateError && error.code === 'Unavailable' ? status.UNAVAILABLE : status.UNKNOWN;
}

export class GrpcDevicePluginServer {
  readonly node: string;
  readonly resourceName: string;
  readonly socketName: string;
  /** `<pluginDir>/<socketName>`: where kubelet dials the plugin. */
  readonly socketPath: string;
  /** `<pluginDir>/kubelet.sock`: where the plugin registers. */
  readonly kubeletSocketPath: string;
  /** Every RPC kubelet made, in order. */
  readonly rpcs: DevicePluginMethod[] = [];
  private readonly plugin: HamiDevicePlugin<Admission>;
  private readonly pollMs: number;
  private readonly retryMs: number;
  private readonly checkMs: number;
  private readonly settleMs: number;
  private readonly registerTimeoutMs: number;
  /** The last lines this plugin logged (bounded), for a failure's message. */
  private readonly recent: string[] = [];
  /** When this plugin last cut an open ListAndWatch stream (serving anew, or stopping). */
  private cutAt: number | undefined;
  private current: Incarnation | undefined;
  private wanted = false;
  private unsubscribe: (() => void) | undefined;
  private transitions: Promise<void> = Promise.resolve();
  private registrationCount = 0;
  /** The next Allocate answer to withhold (holdNextAnswer). */
  private nextHold: { served: Promise<void>; gate: Promise<void>; reached: () => void } | undefined;
  private readonly registrationWaiters = new Set<{ count: number; resolve: () => void }>();

  constructor(private readonly options: GrpcDevicePluginServerOptions) {
    this.plugin = options.plugin;
    this.node = options.node;
    this.resourceName = options.resourceName ?? DEFAULT_RESOURCE_NAME;
    this.socketName = options.socketName ?? DEFAULT_SOCKET_NAME;
    this.socketPath = join(options.pluginDir, this.socketName);
    this.kubeletSocketPath = join(options.pluginDir, KUBELET_SOCKET);
    this.pollMs = options.pollMs ?? 1000;
    this.retryMs = options.retryMs ?? 200;
    this.checkMs = options.checkMs ?? 1000;
    this.settleMs = options.settleMs ?? 200;
    this.registerTimeoutMs = options.registerTimeoutMs ?? 5000;
    for (const path of [this.socketPath, this.kubeletSocketPath]) {
      if (Buffer.byteLength(path) > MAX_SOCKET_PATH)
        throw new Error(`unix socket path longer than ${MAX_SOCKET_PATH} bytes: ${path}`);
    }
  }

  /** Successful Register calls so far (a registerTwice registration counts twice). */
  get registrations(): number {
    return this.registrationCount;
  }

  /** Whether the plugin process is up (serving its socket). */
  get running(): boolean {
    return this.current !== undefined;
  }

  /**
   * Starts the plugin process: resolves once the socket is served. Registration goes on in the
   * background until kubelet answers (see waitForRegistrations). With followReporting and the node
   * not reporting, it only arms: the process comes up on reportAgain.
   */
  start(): Promise<void> {
    this.wanted = true;
    if (this.unsubscribe === undefined && this.options.followReporting !== false) {
      this.unsubscribe = this.plugin.onReportingChange((node, reporting) => {
        if (node !== this.node) return;
        void this.transition(() =>
          reporting ? (this.wanted ? this.bringUp() : Promise.resolve()) : this.bringDown(),
        ).catch((error: unknown) => {
          this.log(`following the plugin's reporting on ${node}: ${describe(error)}`);
        });
      });
    }
    return this.transition(() =>
      this.options.followReporting !== false && !this.plugin.isReporting(this.node)
        ? Promise.resolve()
        : this.bringUp(),
    );
  }

  /**
   * The next Allocate does all its work (the pod marked allocated, the lock released) and then
   * withholds its answer until `release()`, as a plugin slow to reply would: kubelet keeps waiting,
   * and a kubelet killed meanwhile never learns the result. `served` resolves when the work is done.
   */
  holdNextAnswer(): { served: Promise<void>; release: () => void } {
    let served: () => void = () => undefined;
    let release: () => void = () => undefined;
    const hold = {
      served: new Promise<void>((resolve) => {
        served = resolve;
      }),
      gate: new Promise<void>((resolve) => {
        release = resolve;
      }),
      reached: () => {
        served();
      },
    };
    this.nextHold = hold;
    return { served: hold.served, release };
  }

  private async withheld(signal: AbortSignal): Promise<void> {
    const hold = this.nextHold;
    if (hold === undefined) return;
    this.nextHold = undefined;
    hold.reached();
    // A plugin that dies while holding answers nothing more, as stop() promises.
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        reject(new Error('plugin stopped'));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      void hold.gate.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** The plugin process dies: server closed, socket removed, queued and stalled calls cut. */
  stop(): Promise<void> {
    this.wanted = false;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    return this.transition(() => this.bringDown());
  }

  /** stop() then start(): a new process serves and registers again. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Re-reads the device list now for every open ListAndWatch stream (sends it if it changed). */
  async refresh(): Promise<void> {
    await Promise.all([...(this.current?.streams.values() ?? [])].map((push) => push()));
  }

  /** Resolves once `count` Register calls have succeeded in all (default: one more than now). */
  waitForRegistrations(count = this.registrationCount + 1, options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.registrationCount >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer =
        options.timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.registrationWaiters.delete(waiter);
              reject(
                new Error(
                  `${this.node}: ${this.registrationCount} registrations after ${options.timeoutMs} ms, ` +
                    `waited for ${count}`,
                ),
              );
            }, options.timeoutMs);
      const waiter = {
        count,
        resolve: () => {
          if (timer !== undefined) clearTimeout(timer);
          resolve();
        },
      };
      this.registrationWaiters.add(waiter);
    });
  }

  private transition(step: () => Promise<void>): Promise<void> {
    const next = this.transitions.then(step);
    this.transitions = next.catch(() => undefined);
    return next;
  }

  private log(line: string): void {
    const stamped = `${new Date().toISOString()} ${line}`;
    this.recent.push(stamped);
    if (this.recent.length > RECENT_LINES) this.recent.shift();
    this.options.log?.(`device plugin ${this.node}: ${line}`);
  }

  /** What this plugin did lately (its last log lines, timestamped), to explain a failure. */
  recentLines(): string[] {
    return [...this.recent];
  }

  private emit(event: GrpcPluginEvent): void {
    try {
      this.options.onEvent?.(event);
    } catch {
      // An observer must not change what the plugin does.
    }
  }

  private async bringUp(): Promise<void> {
    if (this.current !== undefined) return;
    const incarnation: Incarnation = {
      controller: new AbortController(),
      server: undefined,
      watcher: undefined,
      timer: undefined,
      needServe: false,
      needRegister: this.options.neverRegister !== true,
      serving: false,
      registeredTo: undefined,
      kicked: false,
      wake: undefined,
      loop: Promise.resolve(),
      streams: new Map(),
    };
    this.current = incarnation;
    try {
      await mkdir(this.options.pluginDir, { recursive: true });
      await this.serve(incarnation);
      incarnation.watcher = watch(this.options.pluginDir, (eventType, filename) => {
        this.onFolderEvent(incarnation, eventType, filename);
      });
      incarnation.watcher.on('error', (error) => {
        this.log(`watching ${this.options.pluginDir}: ${describe(error)}`);
      });
    } catch (error) {
      this.current = undefined;
      await this.teardown(incarnation);
      throw error;
    }
    incarnation.timer = setInterval(() => {
      this.check(incarnation);
    }, this.checkMs);
    incarnation.loop = this.run(incarnation);
  }

  private async bringDown(): Promise<void> {
    const incarnation = this.current;
    if (incarnation === undefined) return;
    this.current = undefined;
    await this.teardown(incarnation);
    this.log('stopped');
    this.emit({ kind: 'stopped' });
  }

  private async teardown(incarnation: Incarnation): Promise<void> {
    // Cuts calls queued or stalled in HamiDevicePlugin, the register loop and a Register under way.
    incarnation.controller.abort();
    incarnation.watcher?.close();
    if (incarnation.timer !== undefined) clearInterval(incarnation.timer);
    if (incarnation.streams.size > 0) this.cutAt = Date.now();
    for (const cleanup of [...incarnation.streams.keys()]) cleanup();
    // Let the cut calls write their error before the connections go.
    await new Promise<void>((resolve) => setImmediate(resolve));
    incarnation.server?.forceShutdown();
    incarnation.server = undefined;
    await incarnation.loop.catch(() => undefined);
    await rm(this.socketPath, { force: true });
  }

  private onFolderEvent(incarnation: Incarnation, eventType: string, filename: string | null): void {
    if (incarnation.controller.signal.aborted || eventType !== 'rename') return;
    if (filename === KUBELET_SOCKET) {
      // kubelet (re)started: HAMi restarts its plugin on the creation of kubelet.sock. An event for
      // the kubelet.sock already registered with (delivered late) changes nothing.
      const kubelet = stampOf(this.kubeletSocketPath);
      if (kubelet !== undefined && kubelet !== incarnation.registeredTo && this.options.neverRegister !== true) {
        this.log('kubelet.sock created: serving anew and registering again');
        this.registerAfresh(incarnation);
      }
    } else if (filename === this.socketName && !incarnation.serving && !existsSync(this.socketPath)) {
      this.log(`${this.socketName} removed: serving it again`);
      incarnation.needServe = true;
      this.kick(incarnation);
    }
  }

  private check(incarnation: Incarnation): void {
    if (incarnation.controller.signal.aborted) return;
    if (!incarnation.serving && !existsSync(this.socketPath)) {
      incarnation.needServe = true;
      this.kick(incarnation);
    }
    const kubelet = stampOf(this.kubeletSocketPath);
    if (
      this.options.neverRegister !== true &&
      kubelet !== undefined &&
      incarnation.registeredTo !== undefined &&
      kubelet !== incarnation.registeredTo
    ) {
      this.registerAfresh(incarnation);
    }
  }

  /**
   * A Register from a newly served socket, unless one is already due: that one is from a fresh
   * socket or a kubelet that never connected, and serving again would cut what it sets up.
   */
  private registerAfresh(incarnation: Incarnation): void {
    if (!incarnation.needRegister) incarnation.needServe = true;
    this.kick(incarnation);
  }

  private kick(incarnation: Incarnation): void {
    if (incarnation.wake === undefined) incarnation.kicked = true;
    else incarnation.wake();
  }

  /** Until kicked, `ms` elapsed (when given) or the process stops. */
  private pause(incarnation: Incarnation, ms?: number): Promise<void> {
    if (incarnation.kicked || incarnation.controller.signal.aborted) {
      incarnation.kicked = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const signal = incarnation.controller.signal;
      const done = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal.removeEventListener('abort', done);
        incarnation.wake = undefined;
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      incarnation.wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Serves the socket again when it went, registers when asked, until the process stops. */
  private async run(incarnation: Incarnation): Promise<void> {
    const signal = incarnation.controller.signal;
    const ended = () => signal.aborted;
    while (!ended()) {
      if (incarnation.needServe) {
        try {
          await this.serve(incarnation);
          incarnation.needServe = false;
          // kubelet's connection went with the old server: only a new Register brings it back.
          incarnation.needRegister = this.options.neverRegister !== true;
        } catch (error) {
          this.log(`serving ${this.socketPath} failed: ${describe(error)}`);
          await this.pause(incarnation, this.retryMs);
          continue;
        }
      }
      if (incarnation.needRegister && !ended()) {
        if (!existsSync(this.socketPath)) {
          incarnation.needServe = true;
          continue;
        }
        // A Register that reaches kubelet before it has seen a cut stream end is refused, and on
        // kubelet 1.37 the refusal wedges the resource (see the header).
        await this.settle(incarnation);
        if (ended()) break;
        const outcome = await this.registerOnce(incarnation);
        if (outcome === 'registered') {
          incarnation.needRegister = false;
          if (this.options.registerTwice === true) await this.registerOnce(incarnation);
        } else {
          // kubelet answered no, or may have said yes too late for us: it may hold a connection
          // to this socket, so the next Register comes from a new one (HAMi restarts its plugin).
          if (outcome === 'failed') incarnation.needServe = true;
          await this.pause(incarnation, this.retryMs);
          continue;
        }
      }
      await this.pause(incarnation);
    }
  }

  private async serve(incarnation: Incarnation): Promise<void> {
    incarnation.serving = true;
    if (incarnation.streams.size > 0) this.cutAt = Date.now();
    try {
      for (const cleanup of [...incarnation.streams.keys()]) cleanup();
      if (incarnation.server !== undefined) {
        incarnation.server.forceShutdown();
        incarnation.server = undefined;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      await rm(this.socketPath, { force: true });
      const server = new Server();
      server.addService(devicePluginService('DevicePlugin'), this.handlers(incarnation));
      await new Promise<void>((resolve, reject) => {
        server.bindAsync(`unix:${this.socketPath}`, ServerCredentials.createInsecure(), (error) => {
          if (error === null) resolve();
          else reject(error);
        });
      });
      if (incarnation.controller.signal.aborted) {
        server.forceShutdown();
        throw new Error('device plugin stopped while serving');
      }
      incarnation.server = server;
      this.log(`serving ${this.socketPath}`);
      this.emit({ kind: 'serving', socket: this.socketPath });
    } finally {
      incarnation.serving = false;
    }
  }

  /** How long until `settleMs` have passed since this plugin last cut a kubelet's stream (serving anew or stopping). */
  private settleLeftMs(): number {
    return this.cutAt === undefined ? 0 : this.cutAt + this.settleMs - Date.now();
  }

  /** Until settleLeftMs() is over, unless the process stops. */
  private settle(incarnation: Incarnation): Promise<void> {
    const waitMs = this.settleLeftMs();
    if (waitMs <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const signal = incarnation.controller.signal;
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Resolves once a kubelet whose stream this plugin cut has had `settleMs` to see it end: a new
   * plugin serving the same socket waits for this before it registers (as a restarted process would).
   */
  async settled(): Promise<void> {
    const waitMs = this.settleLeftMs();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }

  /**
   * One Register call: 'registered'; 'absent' (no kubelet.sock); 'unreachable' (nobody listens
   * there: kubelet never saw the call); 'failed' (kubelet refused, or the answer was lost or late).
   */
  private registerOnce(incarnation: Incarnation): Promise<'registered' | 'absent' | 'unreachable' | 'failed'> {
    const before = stampOf(this.kubeletSocketPath);
    if (before === undefined) return Promise.resolve('absent');
    const method = devicePluginMethod<RegisterRequest, Empty>('Registration', 'Register');
    const request: RegisterRequest = {
      version: API_VERSION,
      endpoint: this.socketName,
      resource_name: this.resourceName,
      options: {
        pre_start_required: false,
        get_preferred_allocation_available: this.options.preferredAllocation !== false,
      },
    };
    const client = new Client(`unix:${this.kubeletSocketPath}`, credentials.createInsecure());
    return new Promise((resolve) => {
      const signal = incarnation.controller.signal;
      const call = client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        new Metadata(),
        { deadline: Date.now() + this.registerTimeoutMs },
        (error) => {
          signal.removeEventListener('abort', cancel);
          client.close();
          if (error === null) {
            // A kubelet.sock replaced during the call leaves it unclear which kubelet answered:
            // `before` then differs from the file, and the check serves anew and registers again.
            incarnation.registeredTo = before;
            this.registrationCount += 1;
            this.log(`registered ${this.resourceName} with kubelet (endpoint ${this.socketName})`);
            this.emit({ kind: 'registered', count: this.registrationCount });
            for (const waiter of [...this.registrationWaiters]) {
              if (this.registrationCount >= waiter.count) {
                this.registrationWaiters.delete(waiter);
                waiter.resolve();
              }
            }
            resolve('registered');
          } else {
            this.log(`Register with kubelet failed: ${error.message}`);
            this.emit({ kind: 'register-failed', error: error.message });
            resolve(error.code === status.UNAVAILABLE ? 'unreachable' : 'failed');
          }
        },
      );
      const cancel = () => {
        call.cancel();
      };
      signal.addEventListener('abort', cancel, { once: true });
    });
  }

  private called(method: DevicePluginMethod): void {
    this.rpcs.push(method);
    this.emit({ kind: 'rpc', method });
  }

  private handlers(incarnation: Incarnation): UntypedServiceImplementation {
    const node = this.node;
    const plugin = this.plugin;
    const answer = <T>(callback: sendUnaryData<T>, run: () => Promise<T>): void => {
      run().then(
        (value) => {
          callback(null, value);
        },
        (error: unknown) => {
          callback(grpcError(codeOf(error), describe(error)));
        },
      );
    };
    return {
      GetDevicePluginOptions: (
        _call: ServerUnaryCall<Empty, DevicePluginOptions>,
        callback: sendUnaryData<DevicePluginOptions>,
      ) => {
        this.called('GetDevicePluginOptions');
        callback(null, {
          pre_start_required: false,
          get_preferred_allocation_available: this.options.preferredAllocation !== false,
        });
      },
      ListAndWatch: (call: ServerWritableStream<Empty, ListAndWatchResponse>) => {
        this.called('ListAndWatch');
        this.listAndWatch(incarnation, call);
      },
      GetPreferredAllocation: (
        call: ServerUnaryCall<PreferredAllocationRequest, PreferredAllocationResponse>,
        callback: sendUnaryData<PreferredAllocationResponse>,
      ) => {
        this.called('GetPreferredAllocation');
        answer(callback, async () => {
          const requests = call.request.container_requests.map((request) => ({
            available: request.available_deviceIDs,
            mustInclude: request.must_include_deviceIDs,
            size: request.allocation_size,
          }));
          const preferred = await plugin.preferredAllocation(node, requests);
          return { container_responses: preferred.map((deviceIDs) => ({ deviceIDs })) };
        });
      },
      Allocate: (
        call: ServerUnaryCall<AllocateRequest, AllocateResponse>,
        callback: sendUnaryData<AllocateResponse>,
      ) => {
        this.called('Allocate');
        answer(callback, async () => {
          const responses: ContainerAllocateResponse[] = [];
          for (const request of call.request.container_requests) {
            const response = await plugin.allocate({
              node,
              deviceIds: request.devices_ids,
              signal: incarnation.controller.signal,
              transport: 'grpc',
            });
            responses.push({ envs: response.envs, mounts: [], devices: [], annotations: {}, cdi_devices: [] });
          }
          await this.withheld(incarnation.controller.signal);
          return { container_responses: responses };
        });
      },
      PreStartContainer: (
        _call: ServerUnaryCall<PreStartContainerRequest, PreStartContainerResponse>,
        callback: sendUnaryData<PreStartContainerResponse>,
      ) => {
        this.called('PreStartContainer');
        callback(null, {});
      },
    };
  }

  private listAndWatch(incarnation: Incarnation, call: ServerWritableStream<Empty, ListAndWatchResponse>): void {
    let last: string | undefined;
    let busy = false;
    let again = false;
    let closed = false;
    // Read through functions: the stream closes and pushes pile up while a read is awaited.
    const isClosed = () => closed;
    const pushAgain = () => again;
    const push = async (): Promise<void> => {
      if (closed) return;
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        do {
          again = false;
          let devices: KubeletDevice[];
          try {
            devices = await this.plugin.listKubeletDevices(this.node);
          } catch (error) {
            this.log(`ListAndWatch: reading the devices of ${this.node} failed: ${describe(error)}`);
            continue;
          }
          const key = JSON.stringify(devices);
          if (isClosed() || key === last) continue;
          last = key;
          try {
            call.write({ devices: devices.map((device) => ({ ID: device.id, health: device.health })) });
          } catch (error) {
            this.log(`ListAndWatch: sending to kubelet failed: ${describe(error)}`);
            continue;
          }
          this.emit({
            kind: 'devices-sent',
            devices: devices.length,
            healthy: devices.filter((device) => device.health === 'Healthy').length,
          });
        } while (pushAgain() && !isClosed());
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => {
      void push();
    }, this.pollMs);
    const cleanup = () => {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      incarnation.streams.delete(cleanup);
    };
    incarnation.streams.set(cleanup, push);
    call.on('cancelled', cleanup);
    call.on('error', cleanup);
    call.on('finish', cleanup);
    if (incarnation.controller.signal.aborted) cleanup();
    else void push();
  }
}
