/**
 * The little of Markdown the docs checks need: fenced blocks, headings and their GitHub anchors,
 * relative links, and the command lines a reader can copy. Pure functions over a document's text;
 * the tests read the files.
 */
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');

/** README.md and every docs/*.md, as paths relative to the repository root, sorted. */
export function documentationFiles(root: string = REPO_ROOT): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`)
    .sort();
  return ['README.md', ...docs];
}

export interface SourceLine {
  /** 1-based line number in the document. */
  line: number;
  text: string;
  /** The info string of the fenced block the line is in (`sh`, `console`, '' for a bare fence); undefined outside blocks. */
  fence: string | undefined;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/;

/**
 * Every line with the fenced block it belongs to. The fence lines themselves are left out, so a
 * caller never mistakes them for content. A block closes on a fence of the same character at least
 * as long as its opener, as CommonMark says.
 */
export function classifyLines(markdown: string): SourceLine[] {
  const lines: SourceLine[] = [];
  let open: { marker: string; info: string } | undefined;
  markdown.split('\n').forEach((text, index) => {
    const fence = FENCE.exec(text);
    if (fence !== null) {
      const marker = fence[2] ?? '';
      if (open === undefined) {
        open = { marker, info: fence[3] ?? '' };
        return;
      }
      if (marker[0] === open.marker[0] && marker.length >= open.marker.length && text.trim() === marker) {
        open = undefined;
        return;
      }
    }
    lines.push({ line: index + 1, text, fence: open?.info });
  });
  return lines;
}

/** The parts of a line outside inline code spans, so a backticked `[x](y)` is not taken for a link. */
function outsideCodeSpans(text: string): string {
  return text.replace(/(`+)[\s\S]*?\1/g, ' ');
}

/**
 * A heading's anchor as GitHub makes it: the rendered text (code spans keep their content, link
 * and emphasis markup goes), lower-cased, every character that is not a letter, digit, space, `-`
 * or `_` dropped, spaces turned into `-`.
 */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M} _-]/gu, '').replace(/ /g, '-');
}

/** Every anchor a document defines: its ATX headings outside code blocks, repeats suffixed -1, -2 as on GitHub. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text, fence } of classifyLines(markdown)) {
    if (fence !== undefined) continue;
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (heading === null) continue;
    const base = githubSlug(heading[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

export interface MarkdownLink {
  line: number;
  target: string;
}

/** Inline links `[text](target)` outside code, with targets that are not absolute URLs or mail addresses. */
export function relativeLinks(markdown: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  for (const { line, text, fence } of classifyLines(markdown)) {
    if (fence !== undefined) continue;
    for (const match of outsideCodeSpans(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ line, target });
    }
  }
  return links;
}

export interface ShownCommand {
  line: number;
  /** The command with its prompt, trailing comment and line continuations gone, whitespace collapsed. */
  command: string;
}

/** Blocks whose every line is a command: a reader pastes them into a shell as they are. */
const SHELL_BLOCKS = new Set(['sh', 'bash', 'shell']);

function stripTrailingComment(line: string): string {
  return line.replace(/\s+#\s.*$/, '').replace(/\s+#$/, '');
}

/**
 * The command lines a document shows (the rule is spelled out in test/unit/docs/doc-commands.test.ts):
 * in ```sh / ```bash / ```shell blocks every line that is not blank or a comment; in any other
 * fenced block only the lines that start with the prompt `$ `. A line ending in `\` goes on with the
 * next line.
 */
export function shownCommands(markdown: string): ShownCommand[] {
  const commands: ShownCommand[] = [];
  let pending: ShownCommand | undefined;
  let previous = 0;
  for (const { line, text, fence } of classifyLines(markdown)) {
    // A continuation never reaches past the end of its block (fence lines are not in the list).
    if (line !== previous + 1) pending = undefined;
    previous = line;
    if (fence === undefined) {
      pending = undefined;
      continue;
    }
    const trimmed = text.trim();
    let part: string;
    if (pending !== undefined) {
      part = trimmed;
    } else if (SHELL_BLOCKS.has(fence)) {
      if (trimmed === '' || trimmed.startsWith('#')) continue;
      part = trimmed;
    } else if (trimmed.startsWith('$ ')) {
      part = trimmed.slice(2);
    } else {
      continue;
    }
    const continues = part.endsWith('\\');
    const piece = stripTrailingComment(continues ? part.slice(0, -1) : part);
    const command = pending === undefined ? piece : `${pending.command} ${piece}`;
    pending = { line: pending?.line ?? line, command: command.replace(/\s+/g, ' ').trim() };
    if (!continues) {
      commands.push(pending);
      pending = undefined;
    }
  }
  return commands;
}
