import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WardenError } from '../base/errors.js';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority } from '../tls/certificates.js';
import { findFreePorts } from './free-port.js';
import type { ControlPlaneBinaries } from './k8s-binaries.js';
import { buildKubeconfig, renderKubeconfig } from './kubeconfig.js';
import { ManagedProcess } from './managed-process.js';
import type { ShutdownHooks } from './shutdown-hooks.js';
import { retryWhilePortTaken, waitUntilReady } from './wait-until-ready.js';
import { sleep } from '../base/abort.js';

/** A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as plain data. */
export type SchedulerConfiguration = Record<string, unknown> & { profiles?: unknown[]; extenders?: unknown[] };

export interface ControlPlaneOptions {
  binaries: ControlPlaneBinaries;
  /** Where the per-run directory is made; defaults to the OS temp dir. */
  baseDir?: string;
  /** When given, the control plane is stopped on SIGINT/SIGTERM and killed on process exit. */
  shutdownHooks?: ShutdownHooks;
  /** Upper bound for each component to become ready. */
  startTimeoutMs?: number;
  /** Start kube-scheduler with this configuration right away. */
  scheduler?: SchedulerConfiguration;
  /** Progress lines ("etcd ready on …"); silent by default. */
  progress?: (line: string) => void;
  /** Where free loopback ports come from (a test hands out a taken one to see the retry). */
  freePorts?: (count: number) => Promise<number[]>;
}

export class ControlPlaneStartError extends WardenError {}

/** The components a test can crash and bring back (same ports, same data). */
export type RestartableComponent = 'etcd' | 'kube-apiserver';

interface ComponentSpec {
  command: string;
  args: string[];
  ready: (child: ManagedProcess) => Promise<void>;
}

export interface ControllerManagerHandle {
  readonly process: ManagedProcess;
  stop(): Promise<void>;
}

/** kube-scheduler's paths open without credentials for a benchmark's breakdown: its health, metrics and pprof. */
const OPEN_PATHS = '/healthz,/readyz,/livez,/metrics,/debug/*';

export interface SchedulerHandle {
  readonly process: ManagedProcess;
  readonly healthzUrl: string;
  readonly configPath: string;
  stop(): Promise<void>;
}

/** What a started control plane is made of: its run folder, address, credentials and means. */
interface ControlPlaneParts {
  runDir: string;
  /** The kube-apiserver's URL. */
  server: string;
  caPem: string;
  /** The static admin token. */
  token: string;
  kubeconfigPath: string;
  binaries: ControlPlaneBinaries;
  startTimeoutMs: number;
  progress: (line: string) => void;
  /** Kept in memory only: it signs client certificates (kubelets' node identities) on demand. */
  ca: CertificateAuthority;
  freePorts: (count: number) => Promise<number[]>;
}

const ADMIN_USER = 'vgpu-warden-admin';
const CLUSTER_NAME = 'vgpu-warden-local';
/** The controllers kube-controller-manager runs unless told otherwise (startControllerManager). */
const DEFAULT_CONTROLLERS: readonly string[] = [
  'deployment-controller',
  'replicaset-controller',
  'garbage-collector-controller',
];

/** Who a client certificate names: the user (CN) and its groups (O). */
export interface ClientIdentity {
  userName: string;
  groups?: readonly string[];
}

/**
 * A real etcd + kube-apiserver (+ optional kube-scheduler) on free loopback ports, with generated
 * certificates and a static admin token. Used by the integration/e2e tests and by local mode.
 * Everything lives in one temp directory that stop() removes.
 */
export class ControlPlane {
  private readonly schedulers = new Set<SchedulerHandle>();
  private readonly processes: ManagedProcess[] = [];
  private readonly components = new Map<RestartableComponent, { spec: ComponentSpec; process: ManagedProcess }>();
  /** Processes stopped or killed on purpose (restart, a scheduler's stop): their exit is not a crash. */
  private readonly retired = new WeakSet<ManagedProcess>();
  private unregisterHooks: (() => void) | undefined;
  private stopped: Promise<void> | undefined;

  readonly runDir: string;
  readonly server: string;
  readonly caPem: string;
  readonly token: string;
  readonly kubeconfigPath: string;
  private readonly binaries: ControlPlaneBinaries;
  private readonly startTimeoutMs: number;
  private readonly progress: (line: string) => void;
  private readonly ca: CertificateAuthority;
  private readonly freePorts: (count: number) => Promise<number[]>;

  private constructor(parts: ControlPlaneParts) {
    ({
      runDir: this.runDir,
      server: this.server,
      caPem: this.caPem,
      token: this.token,
      kubeconfigPath: this.kubeconfigPath,
      binaries: this.binaries,
      startTimeoutMs: this.startTimeoutMs,
      progress: this.progress,
      ca: this.ca,
      freePorts: this.freePorts,
    } = parts);
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    return retryWhilePortTaken(() => ControlPlane.startOnce(options), options.progress ?? (() => undefined));
  }

  private static async startOnce(options: ControlPlaneOptions): Promise<ControlPlane> {
    const progress = options.progress ?? (() => undefined);
    const timeoutMs = options.startTimeoutMs ?? 90_000;
    const freePorts = options.freePorts ?? findFreePorts;
    const runDir = mkdtempSync(join(options.baseDir ?? tmpdir(), 'vgpu-warden-cp-'));
    const pki = writeControlPlanePki(runDir);
    // All three at once: asked one after another, the kernel may hand the API port to etcd.
    const [apiPort = 0, etcdClientPort = 0, etcdPeerPort = 0] = await freePorts(3);
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = join(runDir, 'kubeconfig');
    writeFileSync(
      kubeconfigPath,
      renderKubeconfig({ clusterName: CLUSTER_NAME, server, caPem: pki.caPem, userName: ADMIN_USER, token: pki.token }),
      { mode: 0o600 },
    );

    const plane = new ControlPlane({
      runDir,
      server,
      caPem: pki.caPem,
      token: pki.token,
      kubeconfigPath,
      binaries: options.binaries,
      startTimeoutMs: timeoutMs,
      progress,
      ca: pki.ca,
      freePorts,
    });
    plane.unregisterHooks = options.shutdownHooks?.register({
      name: 'control plane',
      stop: () => plane.stop(),
      killSync: () => {
        plane.killSync();
      },
    });
    try {
      await plane.startEtcdAndApiserver(
        { api: apiPort, etcdClient: etcdClientPort, etcdPeer: etcdPeerPort },
        pki.files,
      );
      if (options.scheduler) await plane.startScheduler(options.scheduler);
    } catch (error) {
      await plane.stop();
      throw new ControlPlaneStartError(`control plane did not start: ${(error as Error).message}`, { cause: error });
    }
    return plane;
  }

  private async startEtcdAndApiserver(
    ports: { api: number; etcdClient: number; etcdPeer: number },
    files: PkiFiles,
  ): Promise<void> {
    const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
    const peerUrl = `http://127.0.0.1:${ports.etcdPeer}`;
    await this.startComponent('etcd', {
      command: this.binaries.etcd,
      args: [
        `--data-dir=${join(this.runDir, 'etcd-data')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=default=${peerUrl}`,
        // A throwaway test store: durability is not worth the fsync latency.
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      ready: (child) =>
        waitUntilReady(child, {
          url: `${etcdUrl}/health`,
          timeoutMs: this.startTimeoutMs,
          expectBody: '"health":"true"',
        }),
    });
    this.progress(`etcd ready on ${etcdUrl}`);

    await this.startComponent('kube-apiserver', {
      command: this.binaries.kubeApiserver,
      args: [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${ports.api}`,
        // Loopback advertise address plus no endpoint reconciler: the built-in "kubernetes" Endpoints
        // would otherwise be rejected for pointing into 127.0.0.0/8.
        '--advertise-address=127.0.0.1',
        '--endpoint-reconciler-type=none',
        `--tls-cert-file=${files.servingCert}`,
        `--tls-private-key-file=${files.servingKey}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${files.saPublicKey}`,
        `--service-account-signing-key-file=${files.saPrivateKey}`,
        `--token-auth-file=${files.tokens}`,
        // Client certificates from our CA authenticate kubelets (system:node:<name>); the Node
        // authorizer and NodeRestriction then confine each kubelet to its own node and pods, as in a
        // real cluster, so a test cannot pass only because a kubelet had admin rights.
        `--client-ca-file=${files.caCert}`,
        '--authorization-mode=Node,RBAC',
        '--enable-admission-plugins=NodeRestriction',
        // No controller-manager: no default ServiceAccount to admit pods with, and nothing would ever
        // remove the not-ready taint from kubelet-less nodes.
        '--disable-admission-plugins=ServiceAccount,TaintNodesByCondition',
        // Logs, exec and port-forward: kubelets require a client certificate from our CA. Their
        // serving certificates are self-signed (no --kubelet-certificate-authority, so not verified),
        // and a node's only reachable address is the InternalIP 127.0.0.1 set by the real-node
        // fixture: its Hostname (the node name) resolves nowhere.
        `--kubelet-client-certificate=${files.kubeletClientCert}`,
        `--kubelet-client-key=${files.kubeletClientKey}`,
        '--kubelet-preferred-address-types=InternalIP,Hostname',
        '--allow-privileged=true',
        `--profiling=${process.env.BENCH_PPROF ? 'true' : 'false'}`,
        '--v=1',
      ],
      ready: (child) =>
        waitUntilReady(child, { url: `${this.server}/readyz`, caPem: this.caPem, timeoutMs: this.startTimeoutMs }),
    });
    this.progress(`kube-apiserver ready on ${this.server}`);
  }

  private async startComponent(name: RestartableComponent, spec: ComponentSpec): Promise<void> {
    const child = this.spawn(name, spec.command, spec.args);
    this.components.set(name, { spec, process: child });
    await spec.ready(child);
  }

  /**
   * Crashes a component (SIGKILL, as an OOM kill or a node loss would), keeps it down for `downMs`,
   * then starts it again on the same ports with the same data and waits until it is ready. For
   * fault-injection tests: clients see refused connections, then a fresh process.
   */
  async restart(name: RestartableComponent, options: { downMs?: number } = {}): Promise<void> {
    const current = this.components.get(name);
    if (current === undefined) throw new ControlPlaneStartError(`${name} is not running`);
    // Same place in the start order, so stop() still takes kube-apiserver down before etcd.
    const position = this.processes.indexOf(current.process);
    this.retire(current.process);
    current.process.killNow();
    await current.process.exited;
    await sleep(options.downMs ?? 0);
    const started = this.startComponent(name, current.spec);
    const fresh = this.processes.pop();
    if (fresh !== undefined) this.processes.splice(position, 0, fresh);
    await started;
    this.progress(`${name} restarted`);
  }

  /**
   * Starts kube-controller-manager with only `controllers` (default: deployment, replicaset and the
   * garbage collector). Never the node lifecycle controller: it would taint kubelet-less nodes.
   * Controllers use their own ServiceAccounts, so their writes come from the identities a real
   * cluster's do (the ReplicaSet controller creates pods as system:serviceaccount:kube-system:replicaset-controller).
   */
  async startControllerManager(options: { controllers?: string[] } = {}): Promise<ControllerManagerHandle> {
    const binary = this.binaries.kubeControllerManager;
    if (binary === undefined)
      throw new ControlPlaneStartError('kube-controller-manager is not built; run "bash tools/k8s/build.sh"');
    return retryWhilePortTaken(() => this.startControllerManagerOnce(binary, options), this.progress);
  }

  private async startControllerManagerOnce(
    binary: string,
    options: { controllers?: string[] },
  ): Promise<ControllerManagerHandle> {
    const [port = 0] = await this.freePorts(1);
    const child = this.spawn(`kube-controller-manager:${port}`, binary, [
      `--kubeconfig=${this.kubeconfigPath}`,
      `--authentication-kubeconfig=${this.kubeconfigPath}`,
      `--authorization-kubeconfig=${this.kubeconfigPath}`,
      `--controllers=${(options.controllers ?? DEFAULT_CONTROLLERS).join(',')}`,
      '--use-service-account-credentials=true',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      '--v=1',
    ]);
    const stop = async () => {
      this.retire(child);
      await child.stop();
    };
    try {
      await waitUntilReady(child, { url: `https://127.0.0.1:${port}/healthz`, timeoutMs: this.startTimeoutMs });
    } catch (error) {
      await stop();
      throw error;
    }
    this.progress(`kube-controller-manager ready on port ${port}`);
    return { process: child, stop };
  }

  /** Starts a kube-scheduler with `config` (kubeconfig and leader election are filled in). */
  async startScheduler(config: SchedulerConfiguration): Promise<SchedulerHandle> {
    return retryWhilePortTaken(() => this.startSchedulerOnce(config), this.progress);
  }

  private async startSchedulerOnce(config: SchedulerConfiguration): Promise<SchedulerHandle> {
    const [port = 0] = await this.freePorts(1);
    const configPath = join(this.runDir, `scheduler-${port}.json`);
    const full = {
      apiVersion: 'kubescheduler.config.k8s.io/v1',
      kind: 'KubeSchedulerConfiguration',
      leaderElection: { leaderElect: false },
      ...config,
      // The config may tune the client (qps, burst); the kubeconfig is always this plane's.
      clientConnection: { ...(config.clientConnection as object | undefined), kubeconfig: this.kubeconfigPath },
    };
    writeFileSync(configPath, JSON.stringify(full, null, 2));
    const scheduler = this.spawn(`kube-scheduler:${port}`, this.binaries.kubeScheduler, [
      `--config=${configPath}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      '--v=2',
      // BENCH_VERBOSE, BENCH_PPROF: its metrics and CPU profile readable without credentials, for a bench's breakdown.
      ...(process.env.BENCH_VERBOSE || process.env.BENCH_PPROF
        ? [`--authorization-always-allow-paths=${OPEN_PATHS}`]
        : []),
    ]);
    const healthzUrl = `https://127.0.0.1:${port}/healthz`;
    const handle: SchedulerHandle = {
      process: scheduler,
      healthzUrl,
      configPath,
      stop: async () => {
        this.schedulers.delete(handle);
        this.retire(scheduler);
        await scheduler.stop();
      },
    };
    this.schedulers.add(handle);
    try {
      await waitUntilReady(scheduler, { url: healthzUrl, timeoutMs: this.startTimeoutMs });
    } catch (error) {
      await handle.stop();
      throw error;
    }
    this.progress(`kube-scheduler ready (health ${healthzUrl})`);
    return handle;
  }

  /**
   * A kubeconfig (JSON text) that authenticates as `identity` with a fresh client certificate from
   * the control plane's CA, e.g. a kubelet's `system:node:<name>` in group `system:nodes`.
   */
  issueClientKubeconfig(identity: ClientIdentity, validityDays = 7): string {
    const groups = identity.groups ?? [];
    if (groups.length > 1)
      throw new TypeError(
        'issueClientKubeconfig: certificates/certificates.ts writes one organization, so give at most one group',
      );
    const issued = issueCertificate(this.ca, {
      commonName: identity.userName,
      organization: groups[0],
      usage: 'client',
      validityDays,
    });
    const config = buildKubeconfig({
      clusterName: CLUSTER_NAME,
      server: this.server,
      caPem: this.caPem,
      userName: identity.userName,
      token: '',
    });
    const base64 = (pem: string) => Buffer.from(pem).toString('base64');
    config.users = [
      {
        name: identity.userName,
        user: { 'client-certificate-data': base64(issued.certPem), 'client-key-data': base64(issued.keyPem) },
      },
    ];
    return JSON.stringify(config, null, 2) + '\n';
  }

  /** The kubeconfig a kubelet registering node `nodeName` uses (user system:node:<name>, group system:nodes). */
  issueNodeKubeconfig(nodeName: string): string {
    return this.issueClientKubeconfig({ userName: `system:node:${nodeName}`, groups: ['system:nodes'] });
  }

  /** Stops schedulers, then kube-apiserver, then etcd, and removes the run directory. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await Promise.all([...this.schedulers].map((scheduler) => scheduler.stop()));
      for (const child of [...this.processes].reverse()) await child.stop();
      rmSync(this.runDir, { recursive: true, force: true });
      this.unregisterHooks?.();
    })();
    return this.stopped;
  }

  /**
   * Resolves with the first component that exits on its own, e.g. a crashed kube-apiserver; exits
   * caused by stop() do not count.
   */
  firstUnexpectedExit(): Promise<ManagedProcess> {
    const never = new Promise<never>(() => undefined);
    return Promise.race(
      this.processes.map((child) => child.exited.then(() => (this.stopped || this.retired.has(child) ? never : child))),
    );
  }

  /** Pids (process groups) of everything this control plane started, for leak checks. */
  get processGroupIds(): number[] {
    return this.processes.map((child) => child.pid);
  }

  /** Takes a process out of the crash watch and the stop order; its exit is expected. */
  private retire(child: ManagedProcess): void {
    this.retired.add(child);
    const position = this.processes.indexOf(child);
    if (position >= 0) this.processes.splice(position, 1);
  }

  private killSync(): void {
    for (const child of this.processes) child.killNow();
    rmSync(this.runDir, { recursive: true, force: true });
  }

  private spawn(name: string, command: string, args: string[]): ManagedProcess {
    const logFile = join(this.runDir, `${name.replace(/[^\w.-]/g, '_')}.log`);
    const child = ManagedProcess.start({ name, command, args, logFile, cwd: this.runDir });
    this.processes.push(child);
    return child;
  }
}

interface PkiFiles {
  caCert: string;
  kubeletClientCert: string;
  kubeletClientKey: string;
  servingCert: string;
  servingKey: string;
  saPublicKey: string;
  saPrivateKey: string;
  tokens: string;
}

function writeControlPlanePki(runDir: string): {
  ca: CertificateAuthority;
  caPem: string;
  token: string;
  files: PkiFiles;
} {
  const pkiDir = join(runDir, 'pki');
  mkdirSync(pkiDir, { mode: 0o700 });
  const ca = createCertificateAuthority({ commonName: 'vgpu-warden-local-ca', validityDays: 7 });
  const serving = issueCertificate(ca, {
    commonName: 'kube-apiserver',
    subjectAltNames: ['localhost', '127.0.0.1', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
    usage: 'server',
    validityDays: 7,
  });
  // What kube-apiserver shows kubelets when it proxies logs/exec; kubelets authorize with
  // AlwaysAllow, so the identity only has to be authenticated (system:masters for good measure).
  const kubeletClient = issueCertificate(ca, {
    commonName: 'kube-apiserver-kubelet-client',
    organization: 'system:masters',
    usage: 'client',
    validityDays: 7,
  });
  const serviceAccount = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const token = randomBytes(32).toString('hex');
  const files: PkiFiles = {
    caCert: join(pkiDir, 'ca.crt'),
    kubeletClientCert: join(pkiDir, 'apiserver-kubelet-client.crt'),
    kubeletClientKey: join(pkiDir, 'apiserver-kubelet-client.key'),
    servingCert: join(pkiDir, 'apiserver.crt'),
    servingKey: join(pkiDir, 'apiserver.key'),
    saPublicKey: join(pkiDir, 'sa.pub'),
    saPrivateKey: join(pkiDir, 'sa.key'),
    tokens: join(pkiDir, 'tokens.csv'),
  };
  writeFileSync(files.caCert, ca.certPem);
  writeFileSync(files.kubeletClientCert, kubeletClient.certPem);
  writeFileSync(files.kubeletClientKey, kubeletClient.keyPem, { mode: 0o600 });
  writeFileSync(files.servingCert, serving.certPem);
  writeFileSync(files.servingKey, serving.keyPem, { mode: 0o600 });
  writeFileSync(files.saPublicKey, serviceAccount.publicKey);
  writeFileSync(files.saPrivateKey, serviceAccount.privateKey, { mode: 0o600 });
  // token,user,uid,"groups": system:masters gives the admin every permission under RBAC.
  writeFileSync(files.tokens, `${token},${ADMIN_USER},${ADMIN_USER},"system:masters"\n`, { mode: 0o600 });
  return { ca, caPem: ca.certPem, token, files };
}
