/**
 * Checks that lock critical sections never overlapped on a node. Each section is bounded by the
 * resourceVersions of the writes that took and removed the lock; etcd gives those a single global
 * order, so two holders overlapped exactly when one's take falls inside another's section.
 */
export interface CriticalSection {
  holder: string;
  node: string;
  acquiredRv: string;
  releasedRv: string;
}

export function findOverlaps(sections: readonly CriticalSection[]): string[] {
  const problems: string[] = [];
  const byNode = new Map<string, CriticalSection[]>();
  for (const section of sections) {
    if (BigInt(section.releasedRv) <= BigInt(section.acquiredRv)) {
      problems.push(
        `${section.holder} on ${section.node}: released at ${section.releasedRv} before acquiring at ${section.acquiredRv}`,
      );
    }
    byNode.set(section.node, [...(byNode.get(section.node) ?? []), section]);
  }
  for (const [node, list] of byNode) {
    const ordered = [...list].sort((a, b) => (BigInt(a.acquiredRv) < BigInt(b.acquiredRv) ? -1 : 1));
    for (let index = 1; index < ordered.length; index++) {
      const previous = ordered[index - 1];
      const current = ordered[index];
      if (previous && current && BigInt(current.acquiredRv) <= BigInt(previous.releasedRv)) {
        problems.push(
          `${node}: ${current.holder} took the lock at ${current.acquiredRv} while ${previous.holder} held it (${previous.acquiredRv}..${previous.releasedRv})`,
        );
      }
    }
  }
  return problems;
}
