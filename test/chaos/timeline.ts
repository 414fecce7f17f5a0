/**
 * What happened to each object, in order, so a violation can be explained: the checker's
 * observations, the workload's actions and the faults (the latter under the subject `faults`).
 */
export class Timeline {
  private readonly entries = new Map<string, string[]>();
  private readonly started: number;
  /** Per subject, at most this many entries (the newest); a 30-minute run must not grow without bound. */
  private readonly perSubject: number;

  constructor(options: { started: number; perSubject?: number }) {
    this.started = options.started;
    this.perSubject = options.perSubject ?? 200;
  }

  add(subjects: readonly string[], text: string, at = Date.now()): void {
    const line = `${((at - this.started) / 1000).toFixed(2).padStart(8)}s  ${text}`;
    for (const subject of subjects) {
      let lines = this.entries.get(subject);
      if (lines === undefined) this.entries.set(subject, (lines = []));
      lines.push(line);
      if (lines.length > this.perSubject) lines.splice(0, lines.length - this.perSubject);
    }
  }

  /** The entries of the subjects, merged in time order, plus the faults of the same span. */
  explain(subjects: readonly string[]): string {
    const lines = new Set<string>();
    for (const subject of [...subjects, 'faults', 'kubelet'])
      for (const line of this.entries.get(subject) ?? []) lines.add(`${line}  [${subject}]`);
    return [...lines].sort().join('\n');
  }
}

/**
 * The subjects a free-text log line names: `ns/name` pod keys, and `node/<name>` for each of
 * `nodes` it mentions as a word. Keys with a dot before the slash (hami.io/bind-phase) are annotations.
 */
export function subjectsMentioned(text: string, nodes: readonly string[]): string[] {
  const pods = [...text.matchAll(/(?<![\w./-])([a-z0-9][a-z0-9-]*)\/([a-z0-9][a-z0-9.-]*[a-z0-9])(?![\w/-])/g)].map(
    (match) => `${match[1]}/${match[2]}`,
  );
  const named = nodes
    .filter((node) => new RegExp(`(?<![\\w.-])${node.replace(/[.]/g, '\\.')}(?![\\w-])`).test(text))
    .map((node) => `node/${node}`);
  return [...new Set([...pods, ...named])];
}
