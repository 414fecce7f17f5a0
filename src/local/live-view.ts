import type { LockRow } from '../lock/lock-report.js';
import type { NodeInventory } from '../devices/inventory.js';
import type { GpuUse } from '../devices/usage.js';
import { RELEASE_REASON_TEXT } from '../lock/lock-rules.js';
import { formatAge } from '../base/human-age.js';
import { clip } from '../base/user-text.js';
import type { LiveEvent } from './live-events.js';

export interface LiveNode {
  name: string;
  inventory: NodeInventory | undefined;
  usage: ReadonlyMap<string, GpuUse>;
  /** The lock as `vgpu-warden locks` classifies it; undefined when the node is not locked. */
  lock: LockRow | undefined;
}

export interface LivePendingPod {
  namespace: string;
  name: string;
  createdAt: Date | undefined;
  /** The latest FailedScheduling / FilteringFailed / NodeLockWait / BindingFailed Event about it. */
  reason: LiveEvent | undefined;
}

/** Everything one frame shows; plain data, so a frame is a pure function of it. */
export interface LiveViewState {
  now: Date;
  /** `export KUBECONFIG=…`: shown whole on every frame, so it can always be copied. */
  kubeconfigExport: string;
  /** The latest line of the demo, when one runs or ran. */
  demo: string | undefined;
  /** The latest messages (progress, warnings) that would otherwise have been written under the view. */
  notes: readonly string[];
  nodes: readonly LiveNode[];
  pending: readonly LivePendingPod[];
  /** The cluster's newest Events, older first. */
  events: readonly LiveEvent[];
}

export interface ScreenSize {
  columns: number;
  rows: number;
}

/** Events shown at least, however many nodes there are (when the screen has room for them at all). */
const MIN_EVENT_LINES = 5;
/** Pending pods shown at least before the events take the rest. */
const MIN_PENDING_LINES = 3;
const MESSAGE_CHARS = 200;

const HELD_TEXT: Partial<Record<string, string>> = {
  'bind-in-progress': 'a bind to this node is in progress (younger than BIND_GRACE)',
  'awaiting-allocation': "bound here, waiting for the device plugin's Allocate",
  'kubelet-may-admit': "the pod is gone, but this node's kubelet may still admit it and call Allocate",
  'legacy-fresh': 'a legacy lock without owner, younger than NODELOCK_EXPIRE',
  'release-pending': 'the allocation is over; the device plugin deletes the lock itself',
  'awaiting-allocation-past-expiry':
    'bound here, no Allocate within NODELOCK_EXPIRE; kept, not taken over (HAMi #3096)',
};

/**
 * Strings from the cluster (Event messages, pod names) go onto a terminal: a control character in
 * them could move the cursor or change the terminal's state, so every one becomes a space.
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

/** One screen row: never wider than the screen, since a wrapped row would push the layout down. */
function row(text: string, columns: number): string {
  return text.length <= columns ? text : clip(text, Math.max(1, columns - 1));
}

/**
 * Lines that must be readable whole (the export line, the demo result): split over as many rows as
 * needed; with `atSpaces` at a space when the row has one, else at the width. The export line is
 * cut at the width only, so its rows put together are exactly the command (a path may hold spaces).
 */
export function wrapped(text: string, columns: number, atSpaces = true): string[] {
  const rows: string[] = [];
  let rest = text;
  while (rest.length > columns) {
    const space = atSpaces ? rest.lastIndexOf(' ', columns) : -1;
    const cut = space > 0 ? space : columns;
    rows.push(rest.slice(0, cut));
    rest = rest.slice(space > 0 ? cut + 1 : cut);
  }
  rows.push(rest);
  return rows;
}

function bar(fraction: number, width = 10): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

function holderText(lock: LockRow): string {
  if (lock.holder !== null) return printable(`${lock.holder.namespace}/${lock.holder.name}`);
  return lock.kind === 'legacy' ? '<legacy>' : '<malformed>';
}

function releaseReasonText(reason: string): string {
  return (RELEASE_REASON_TEXT as Partial<Record<string, string>>)[reason] ?? reason;
}

function reasonText(lock: LockRow): string {
  if (lock.state === 'releasable') return `${releaseReasonText(lock.reason)}; the sweeper or the next bind frees it`;
  if (lock.state === 'unknown') return printable(lock.error ?? 'could not be inspected');
  return HELD_TEXT[lock.reason] ?? lock.reason;
}

/** `gpu-node-1  held  default/trainer  12s  bind-in-progress: …`, or `unlocked`. */
export function lockLine(node: string, lock: LockRow | undefined): string {
  if (lock === undefined) return `${node}  unlocked`;
  const stampAhead = lock.stampAheadSeconds === undefined ? '' : ` (stamp +${formatAge(lock.stampAheadSeconds)})`;
  const age = `${formatAge(lock.ageSeconds ?? undefined)}${stampAhead}`;
  return `${node}  ${lock.state}  ${holderText(lock)}  ${age}  ${lock.reason}: ${reasonText(lock)}`;
}

function nodeLines(nodes: readonly LiveNode[]): string[] {
  const lines: string[] = [];
  for (const node of nodes) {
    lines.push(lockLine(printable(node.name), node.lock));
    for (const device of node.inventory?.devices ?? []) {
      const use = node.usage.get(device.uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
      const memoryUse = `${String(use.memoryMiB).padStart(6)}/${device.memoryMiB} MiB`;
      const memory = `mem ${bar(use.memoryMiB / device.memoryMiB)} ${memoryUse}`;
      const cores = `cores ${bar(use.cores / device.cores)} ${String(use.cores).padStart(3)}%`;
      lines.push(`  ${printable(device.uuid).padEnd(24)} ${memory}  ${cores}  tasks ${use.slots}/${device.count}`);
    }
  }
  return lines;
}

/** An event's message, clipped, and how many times it came when more than once. */
function messageText(event: LiveEvent): string {
  return `${printable(clip(event.message, MESSAGE_CHARS))}${event.count > 1 ? ` (x${event.count})` : ''}`;
}

function eventText(event: LiveEvent): string {
  return `${event.reason}: ${messageText(event)}`;
}

function pendingLines(pending: readonly LivePendingPod[], now: Date): string[] {
  return pending.map((pod) => {
    const age =
      pod.createdAt === undefined ? '?' : formatAge(Math.floor((now.getTime() - pod.createdAt.getTime()) / 1000));
    const why = pod.reason === undefined ? 'no scheduling event yet' : eventText(pod.reason);
    return `  ${printable(`${pod.namespace}/${pod.name}`)}  ${age}  ${why}`;
  });
}

function objectText(event: LiveEvent): string {
  const what = `${event.object.kind.toLowerCase()}/${event.object.name}`;
  return printable(
    event.object.namespace === '' || event.object.namespace === 'default'
      ? what
      : `${what} -n ${event.object.namespace}`,
  );
}

function eventLines(events: readonly LiveEvent[]): string[] {
  return events.map(
    (event) =>
      `  ${event.time.toISOString().slice(11, 19)}  ${printable(event.reason).padEnd(18)} ` +
      `${objectText(event).padEnd(28)} ${messageText(event)}`,
  );
}

interface Section {
  title: string[];
  body: string[];
  /** Body lines it gets before later sections get any. */
  minBody: number;
  /** What is cut when it does not fit: the last lines (head kept) or the first (tail kept). */
  keep: 'head' | 'tail';
  empty: string;
}

/** Each section's minimum first, then the rest in screen order; events keep their newest lines. */
function fitSections(sections: readonly Section[], rows: number): string[] {
  const bodies = sections.map((section) => (section.body.length === 0 ? [section.empty] : section.body));
  const sizes = sections.map(
    (section, index) => section.title.length + Math.min(bodies[index]?.length ?? 0, section.minBody),
  );
  let spare = rows - sizes.reduce((sum, size) => sum + size, 0);
  for (let index = sizes.length - 1; index >= 0 && spare < 0; index--) {
    const cut = Math.min(sizes[index] ?? 0, -spare);
    sizes[index] = (sizes[index] ?? 0) - cut;
    spare += cut;
  }
  sections.forEach((section, index) => {
    const room = section.title.length + (bodies[index]?.length ?? 0) - (sizes[index] ?? 0);
    const give = Math.min(spare, Math.max(0, room));
    if ((sizes[index] ?? 0) > 0) {
      sizes[index] = (sizes[index] ?? 0) + give;
      spare -= give;
    }
  });
  return sections.flatMap((section, index) => {
    const size = sizes[index] ?? 0;
    const body = bodies[index] ?? [];
    const bodyRows = size - section.title.length;
    if (bodyRows <= 0) return [];
    if (body.length <= bodyRows) return [...section.title, ...body];
    const hidden = body.length - (bodyRows - 1);
    return section.keep === 'head'
      ? [...section.title, ...body.slice(0, bodyRows - 1), `  … ${hidden} more`]
      : [...section.title, `  … ${hidden} older`, ...body.slice(body.length - (bodyRows - 1))];
  });
}

/**
 * One frame of `vgpu-warden local`'s live view, as rows of at most `size.columns` characters and at
 * most `size.rows` rows. The header (the export line whole, the latest demo result) comes first on
 * every frame; then per node its lock as the lock rules classify it and its GPUs' use, the pending
 * GPU pods with their latest scheduling reason, and the cluster's newest Events. Pure.
 */
export function renderLiveView(state: LiveViewState, size: ScreenSize): string[] {
  const columns = Math.max(10, size.columns);
  const header = [
    row(
      `vgpu-warden local · ${state.now.toISOString().slice(11, 19)} UTC · Ctrl-C stops and removes everything`,
      columns,
    ),
    ...wrapped(state.kubeconfigExport, columns, false),
    ...(state.demo === undefined ? [] : wrapped(printable(state.demo), columns)),
    ...state.notes.map((note) => row(printable(note), columns)),
  ];
  const body = fitSections(
    [
      {
        title: ['', `nodes (${state.nodes.length}):`],
        body: nodeLines(state.nodes),
        minBody: state.nodes.length === 0 ? 1 : 2,
        keep: 'head',
        empty: '  (none)',
      },
      {
        title: ['', `pending GPU pods (${state.pending.length}):`],
        body: pendingLines(state.pending, state.now),
        minBody: MIN_PENDING_LINES,
        keep: 'head',
        empty: '  (none)',
      },
      {
        title: ['', 'recent events, newest last:'],
        body: eventLines(state.events),
        minBody: MIN_EVENT_LINES,
        keep: 'tail',
        empty: '  (none yet)',
      },
    ],
    size.rows - header.length,
  );
  return [...header, ...body.map((line) => row(line, columns))].slice(0, Math.max(0, size.rows));
}
