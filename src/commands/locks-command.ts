import { CoreV1Api } from '@kubernetes/client-node';
import { configFlag, contextFlag, contextOf, EXIT_OK, UsageError, type Command } from './cli.js';
import { describeError, WardenError } from '../base/errors.js';
import { kubeconfigSources, loadKubeConfig } from '../kube/client.js';
import { KubeNodeLockApi } from '../lock/kube-node-lock-api.js';
import { NodeNotFoundError } from '../lock/lock-errors.js';
import { parseLockValue } from '../lock/lock-value.js';
import { NodeLocks } from '../lock/node-locks.js';
import { failedLockRow, formatLockJson, formatLockTable, lockRowOf, type LockRow } from '../lock/lock-report.js';
import { NODE_LOCK_ANNOTATION } from '../hami/wire.js';

/** The cluster could not be read; the cause says why (connection, credentials, RBAC). */
export class LockListError extends WardenError {}

const OUTPUTS = ['table', 'json'] as const;
type Output = (typeof OUTPUTS)[number];

/** Nodes per list page: large clusters are read in pages instead of one huge response. */
const PAGE_SIZE = 500;
/** Locked nodes inspected at once (each costs a node and a pod read). */
const CONCURRENCY = 8;

function outputOf(value: string | boolean | string[] | undefined): Output {
  if (value === undefined) return 'table';
  const found = OUTPUTS.find((output) => output === value);
  if (found === undefined)
    throw new UsageError(
      `unknown output format ${JSON.stringify(value)} for "locks"; expected one of ${OUTPUTS.join(', ')}`,
    );
  return found;
}

interface ListedLock {
  node: string;
  /** The lock value as listed; what a failed inspection reports. */
  raw: string;
}

async function lockedNodes(core: CoreV1Api): Promise<ListedLock[]> {
  const locked: ListedLock[] = [];
  let next: string | undefined;
  do {
    const page = await core.listNode({ limit: PAGE_SIZE, ...(next === undefined ? {} : { _continue: next }) });
    for (const node of page.items) {
      const name = node.metadata?.name;
      const raw = node.metadata?.annotations?.[NODE_LOCK_ANNOTATION];
      if (name !== undefined && raw !== undefined) locked.push({ node: name, raw });
    }
    next = page.metadata?._continue === '' ? undefined : page.metadata?._continue;
  } while (next !== undefined);
  return locked;
}

async function mapConcurrently<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < items.length; index = next++) results[index] = await work(items[index] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * `vgpu-warden locks`: every node carrying hami.io/mutex.lock, with its holder, age and what the
 * lock rules say about it (the same classification the sweeper and binds apply). Reads only.
 * Exit 1 only when the nodes cannot be listed at all: a node whose lock cannot be inspected is
 * listed with state `unknown` (and named on stderr), the others as usual.
 */
export function locksCommand(): Command {
  return {
    name: 'locks',
    summary: 'list every locked node with holder, age and classification',
    usesConfig: true,
    // Reads the cluster with the lock rules; the listeners, certificates and sweeper are not its business.
    settings: ['cluster', 'lockRules'],
    flags: {
      output: { type: 'string', short: 'o', description: 'output format: table (default) or json' },
      kubeconfig: configFlag('kubeconfig'),
      context: contextFlag(),
      'bind-grace': configFlag('bind-grace'),
      'nodelock-expire': configFlag('nodelock-expire'),
      'nodelock-force-after': configFlag('nodelock-force-after'),
    },
    run: async ({ io, flags, config }) => {
      // Checked before any API call, so a typo costs nothing.
      const output = outputOf(flags.output);
      const settings = config();
      const kubeConfig = loadKubeConfig(settings.kubeconfig, kubeconfigSources(io.env), contextOf(flags));
      try {
        const core = kubeConfig.makeApiClient(CoreV1Api);
        const locks = new NodeLocks({
          api: new KubeNodeLockApi(core),
          config: {
            bindGraceMs: settings.bindGraceMs,
            expireMs: settings.nodeLockExpireMs,
            forceAfterMs: settings.nodeLockForceAfterMs,
          },
        });
        let listed: ListedLock[];
        try {
          listed = await lockedNodes(core);
        } catch (error) {
          throw new LockListError('could not list nodes', { cause: error });
        }
        listed.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
        const rows = await mapConcurrently(listed, CONCURRENCY, async ({ node, raw }): Promise<LockRow | undefined> => {
          try {
            return lockRowOf(await locks.inspect(node));
          } catch (error) {
            // Deleted between the list and the read: it holds no lock any more.
            if (error instanceof NodeNotFoundError) return undefined;
            // One node that cannot be inspected (its owner unreadable, a timeout) is reported in its
            // row and on stderr; it never hides the other nodes' locks or fails the whole listing.
            const problem = describeError(
              new LockListError(`could not inspect the lock on node ${node}`, { cause: error }),
            );
            io.stderr(`vgpu-warden: ${problem}`);
            return failedLockRow(node, raw, parseLockValue(raw), problem);
          }
        });
        const present = rows.filter((row): row is LockRow => row !== undefined);
        if (output === 'json') io.stdout(formatLockJson(present));
        else
          formatLockTable(present).forEach((line) => {
            io.stdout(line);
          });
        return EXIT_OK;
      } finally {
        await kubeConfig.close();
      }
    },
  };
}
