import { formatTable } from '../base/table.js';
import { formatAge } from '../base/human-age.js';
import type { ContainerRequest, DecodedAnnotation, Explanation, LockEntry, PlacementReport } from './explanation.js';
import { lockText } from './verdict.js';

/** The `-o json` output: the Explanation as it is (plain data, already bounded). */
export function explanationJson(explanation: Explanation): string {
  return JSON.stringify(explanation, null, 2);
}

const LABEL_WIDTH = 11;

function section(label: string, text: string): string {
  return `${`${label}:`.padEnd(LABEL_WIDTH)}${text}`.trimEnd();
}

function requestText(request: ContainerRequest): string {
  const memory = request.memoryMiB === null ? `${request.memoryPercentage ?? 100}% memory` : `${request.memoryMiB} MiB`;
  return (
    `${request.init ? 'init ' : ''}${request.container}: ${request.gpus} GPU${request.gpus === 1 ? '' : 's'}, ` +
    `${memory}, ${request.cores}% cores`
  );
}

function ageSince(iso: string | null, now: Date): string {
  return iso === null ? '<unknown>' : formatAge((now.getTime() - new Date(iso).getTime()) / 1000);
}

function podLines(explanation: Explanation, now: Date): string[] {
  const { pod } = explanation;
  const lines = [
    section(
      'Pod',
      `${pod.namespace}/${pod.name}  phase ${pod.phase ?? '<none>'}  scheduler ${pod.schedulerName ?? '<none>'}  ` +
        `node ${pod.node ?? '<none>'}  age ${ageSince(pod.createdAt, now)}${pod.deleting ? '  being deleted' : ''}`,
    ),
  ];
  lines.push(section('Requests', pod.requests.length === 0 ? 'no GPU' : pod.requests.map(requestText).join('; ')));
  for (const problem of pod.requestProblems) lines.push(`  ${problem}`);
  const { webhook } = explanation;
  lines.push(
    section(
      'Webhook',
      `${webhook.state}: ${webhook.detail}${webhook.missing.length > 0 ? ` ${webhook.missing.join('; ')}` : ''}`,
    ),
  );
  return lines;
}

function placementLines(placement: PlacementReport | null, explanation: Explanation): string[] {
  if (placement === null)
    return [
      section(
        'Filter',
        explanation.pod.node === null
          ? 'not evaluated (no GPU requested)'
          : `not evaluated (bound to ${explanation.pod.node})`,
      ),
    ];
  if (placement.error !== null) return [section('Filter', `answers with an Error: ${placement.error}`)];
  const fitting = placement.fitting;
  const more = fitting.count > fitting.nodes.length ? ', …' : '';
  const locked =
    placement.lockedFitting.length > 0 ? `; locked by another pod: ${placement.lockedFitting.join(', ')}` : '';
  const fitList = fitting.count > 0 ? `: ${fitting.nodes.join(', ')}${more}${locked}` : '';
  const lines = [section('Filter', `${fitting.count} of ${placement.evaluated} nodes fit${fitList}`)];
  const width = Math.max(0, ...placement.failing.map((group) => group.reason.length));
  for (const group of placement.failing) {
    const [first] = group.nodes;
    const names = group.nodes.map((entry) => entry.node).join(', ') + (group.count > group.nodes.length ? ', …' : '');
    const example =
      first === undefined || first.detail === `1/1 ${group.reason}` ? '' : `  (${first.node}: ${first.detail})`;
    lines.push(
      `  ${group.reason.padEnd(width)}  ${group.count} ${group.count === 1 ? 'node' : 'nodes'}: ${names}${example}`,
    );
  }
  if (placement.moreReasons > 0) lines.push(`  and ${placement.moreReasons} more reasons (see -o json)`);
  return lines;
}

const RELATION_TEXT: Record<LockEntry['relation'], string> = {
  'held-by-this-pod': 'this pod holds it',
  'waited-for': "this pod's bind waits for it",
  'on-a-fitting-node': 'on a node this pod fits',
};

/** The state of a lock's holder, as the Locks section shows it after the lock. */
function holderText(owner: NonNullable<LockEntry['owner']>): string {
  if (!owner.exists) return '; holder not found';
  const node = owner.node === null ? ', unbound' : `, bound to ${owner.node}`;
  const bindPhase = owner.bindPhase === null ? '' : `, bind-phase ${owner.bindPhase}`;
  return `; holder ${owner.phase ?? '<no phase>'}${node}${bindPhase}${owner.deleting ? ', being deleted' : ''}`;
}

function lockLines(locks: readonly LockEntry[]): string[] {
  if (locks.length === 0) return [section('Locks', 'none involving this pod')];
  return [
    section('Locks', ''),
    ...locks.map((lock) => {
      const owner = lock.owner === null ? '' : holderText(lock.owner);
      const error = lock.error === undefined ? '' : `; ${lock.error}`;
      return `  ${lock.node}: ${lockText(lock)}, ${RELATION_TEXT[lock.relation]}${owner}${error}`;
    }),
  ];
}

function gpuText(gpu: { uuid: string; memoryMiB: number; cores: number }): string {
  return `${gpu.uuid} (${gpu.memoryMiB} MiB, ${gpu.cores}% cores)`;
}

function annotationText(decoded: DecodedAnnotation): string {
  if ('error' in decoded) return `unreadable (${decoded.error}): ${decoded.value}`;
  const parts = decoded.containers
    .filter((container) => container.gpus.length > 0)
    .map((container) => `${container.container}: ${container.gpus.map(gpuText).join(', ')}`);
  return parts.length === 0 ? 'nothing left' : parts.join('; ');
}

function bindLines(explanation: Explanation): string[] {
  const { bind } = explanation;
  if (bind.phase === null && bind.allocated === null && bind.toAllocate === null) {
    return [
      section(
        'Bind',
        explanation.pod.node === null ? 'not bound yet' : 'no hami.io/bind-phase, no allocation annotations',
      ),
    ];
  }
  const progress = bind.progress === null ? '' : `, ${bind.progress.done}/${bind.progress.total} containers allocated`;
  const on = bind.vgpuNode === null ? '' : ` on ${bind.vgpuNode}`;
  const at = bind.bindTime === null ? '' : ` at ${bind.bindTime}`;
  const lines = [section('Bind', `bind-phase ${bind.phase ?? '<none>'}${on}${at}${progress}`)];
  if (bind.allocated !== null) lines.push(`  allocated:    ${annotationText(bind.allocated)}`);
  if (bind.toAllocate !== null) lines.push(`  to-allocate:  ${annotationText(bind.toAllocate)}`);
  return lines;
}

function eventLines(explanation: Explanation): string[] {
  const { items, omitted } = explanation.events;
  if (items.length === 0) return [section('Events', 'none')];
  const rows = items.map((event) => [
    event.ageSeconds === null ? '<unknown>' : formatAge(event.ageSeconds),
    event.type,
    event.count > 1 ? `${event.reason} (x${event.count})` : event.reason,
    event.source,
    event.message,
  ]);
  return [
    section(
      'Events',
      omitted > 0 ? `the last ${items.length} of ${items.length + omitted}, oldest first` : 'oldest first',
    ),
    ...formatTable(['AGE', 'TYPE', 'REASON', 'FROM', 'MESSAGE'], rows).map((line) => `  ${line}`),
  ];
}

/** The text output: the verdict first, then one short section per part. */
export function explanationText(explanation: Explanation, now: Date): string[] {
  return [
    section('Verdict', explanation.verdict),
    '',
    ...podLines(explanation, now),
    ...placementLines(explanation.placement, explanation),
    ...lockLines(explanation.locks),
    ...bindLines(explanation),
    ...eventLines(explanation),
  ];
}
