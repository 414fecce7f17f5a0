import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ShutdownRegistry } from './process-host.js';
import { cgroupHierarchies } from './cgroup-roots.js';
import { ensureNodeImage } from './node-image.js';
import { RealNode, type RealNodeOptions } from './real-node.js';
import { errorChain, RealNodeError } from './real-node-error.js';
import {
  currentProcessOwner,
  describeSweep,
  RUN_FOLDER_PREFIX,
  sweepLeftoverRunFolders,
  writeOwner,
} from './run-folder-owner.js';

export interface RealNodeSpec {
  name: string;
  labels?: Readonly<Record<string, string>>;
}

export interface RealNodeFleetOptions extends Omit<
  RealNodeOptions,
  'nodeName' | 'runDir' | 'labels' | 'shutdownHooks'
> {
  nodes: readonly RealNodeSpec[];
  /** Where the run folder is made (mkdtemp); defaults to the OS temp dir. Keep it short: sockets live inside. */
  baseDir?: string;
  /** When given, the fleet is stopped on SIGINT/SIGTERM and killed on process exit. */
  shutdownHooks?: ShutdownRegistry;
}

/**
 * Several real nodes started in parallel in one run folder (sharing one built image archive), and
 * stopped together; stop() removes the run folder too.
 */
export class RealNodeFleet {
  private readonly byName = new Map<string, RealNode>();
  private unregisterHooks: (() => void) | undefined;
  private stopped: Promise<void> | undefined;

  private constructor(readonly runDir: string) {}

  static async start(options: RealNodeFleetOptions): Promise<RealNodeFleet> {
    const names = options.nodes.map((node) => node.name);
    if (new Set(names).size !== names.length) throw new RealNodeError(`node names repeat: ${names.join(', ')}`);
    const baseDir = options.baseDir ?? tmpdir();
    sweepLeftovers(baseDir, options.progress);
    const fleet = new RealNodeFleet(mkdtempSync(join(baseDir, RUN_FOLDER_PREFIX)));
    fleet.unregisterHooks = options.shutdownHooks?.register({
      name: 'real nodes',
      stop: () => fleet.stop(),
      killSync: () => {
        fleet.killSync();
      },
    });
    const { nodes, tools, processes, cluster, kubeConfig, startTimeoutMs, onKubeletStarted, progress } = options;
    const common = { tools, processes, cluster, kubeConfig, startTimeoutMs, onKubeletStarted, progress };
    try {
      // Lets the next run remove this folder, and these nodes' cgroups, should this process be SIGKILLed.
      writeOwner(fleet.runDir, currentProcessOwner());
      // Once, before the nodes race to build it.
      await ensureNodeImage(fleet.runDir, tools);
      const started = await Promise.allSettled(
        nodes.map((spec) =>
          RealNode.start({ ...common, nodeName: spec.name, labels: spec.labels, runDir: fleet.runDir }),
        ),
      );
      started.forEach((result, index) => {
        if (result.status === 'fulfilled') fleet.byName.set(names[index] ?? result.value.nodeName, result.value);
      });
      const failed = started.filter((result) => result.status === 'rejected');
      if (failed.length > 0)
        throw new RealNodeError(
          `${failed.length} of ${nodes.length} real nodes did not start: ` +
            failed.map((result) => (result.reason as Error).message).join('; '),
          { cause: failed[0]?.reason },
        );
    } catch (error) {
      await fleet.stop().catch(() => undefined);
      throw error;
    }
    return fleet;
  }

  /** In the order they were asked for. */
  get nodes(): RealNode[] {
    return [...this.byName.values()];
  }

  node(name: string): RealNode {
    const node = this.byName.get(name);
    if (node === undefined) throw new RealNodeError(`no real node ${name} in this fleet`);
    return node;
  }

  /** Stops every node in parallel, then removes the run folder. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      const results = await Promise.allSettled(this.nodes.map((node) => node.stop()));
      rmSync(this.runDir, { recursive: true, force: true });
      this.unregisterHooks?.();
      const failed = results.filter((result) => result.status === 'rejected');
      if (failed.length > 0)
        throw new RealNodeError(
          `teardown of real nodes incomplete: ${failed.map((result) => (result.reason as Error).message).join('; ')}`,
          { cause: failed[0]?.reason },
        );
    })();
    return this.stopped;
  }

  killSync(): void {
    for (const node of this.nodes) node.killSync();
    rmSync(this.runDir, { recursive: true, force: true });
  }
}

/** Run folders and cgroups of runs that were SIGKILLed; a failed sweep does not stop this run. */
function sweepLeftovers(baseDir: string, progress: ((line: string) => void) | undefined): void {
  try {
    const line = describeSweep(sweepLeftoverRunFolders({ baseDir, hierarchies: cgroupHierarchies() }));
    if (line !== undefined) progress?.(`real nodes: ${line}`);
  } catch (error) {
    progress?.(`real nodes: could not sweep leftover run folders in ${baseDir}: ${errorChain(error)}`);
  }
}
