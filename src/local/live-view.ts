import type { NodeInventory } from '../devices/inventory.js';
import type { GpuUse } from '../devices/usage.js';
import { parseLockValue } from '../lock/lock-value.js';

export interface LiveNode {
  name: string;
  inventory: NodeInventory | undefined;
  usage: ReadonlyMap<string, GpuUse>;
  lock: string | undefined;
}

export interface LiveEvent {
  time: Date;
  object: string;
  reason: string;
  message: string;
}

function age(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  return seconds < 120 ? `${seconds}s` : `${Math.round(seconds / 60)}m`;
}

function bar(fraction: number, width = 10): string {
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/**
 * The terminal view of local mode as plain lines (pure, so it is testable): per node its GPUs' memory
 * and core use, the node lock with holder and age, then the most recent events.
 */
export function renderLiveView(nodes: readonly LiveNode[], events: readonly LiveEvent[], now: Date): string[] {
  const lines = [`vgpu-warden local — ${now.toISOString().slice(11, 19)} UTC — Ctrl-C to stop`, ''];
  for (const node of nodes) {
    const lock = node.lock === undefined ? undefined : parseLockValue(node.lock);
    const lockText = lock === undefined
      ? 'unlocked'
      : lock.kind === 'owned'
        ? `locked by ${lock.owner.namespace}/${lock.owner.name} for ${age(now.getTime() - lock.time.getTime())}`
        : lock.kind === 'legacy' ? `legacy lock, ${age(now.getTime() - lock.time.getTime())} old` : `unreadable lock ${JSON.stringify(lock.raw)}`;
    lines.push(`${node.name}  ${lockText}`);
    for (const device of node.inventory?.devices ?? []) {
      const use = node.usage.get(device.uuid) ?? { slots: 0, memoryMiB: 0, cores: 0 };
      lines.push(`  ${device.uuid.padEnd(24)} mem ${bar(use.memoryMiB / device.memoryMiB)} ${String(use.memoryMiB).padStart(6)}/${device.memoryMiB} MiB  cores ${bar(use.cores / device.cores)} ${String(use.cores).padStart(3)}%  tasks ${use.slots}/${device.count}`);
    }
  }
  lines.push('', 'recent events:');
  for (const event of events.slice(-8)) {
    lines.push(`  ${event.time.toISOString().slice(11, 19)}  ${event.reason.padEnd(18)} ${event.object.padEnd(28)} ${event.message.slice(0, 90)}`);
  }
  if (events.length === 0) lines.push('  (none yet)');
  return lines;
}
