/**
 * Every relative link in README.md and docs/*.md leads somewhere: the file (or folder) exists, and
 * a `#anchor` names a heading of the target document under GitHub's anchor rules (see githubSlug).
 * The docs moved out of one long README into files by task; a link that points at a heading since
 * renamed or moved is the breakage this catches.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { expect } from 'chai';
import {
  REPO_ROOT,
  documentationFiles,
  githubSlug,
  headingAnchors,
  relativeLinks,
} from '../../../tools/docs/markdown.js';

const anchorsByFile = new Map<string, Set<string>>();
function anchorsOf(path: string): Set<string> {
  let anchors = anchorsByFile.get(path);
  if (anchors === undefined) {
    anchors = headingAnchors(readFileSync(path, 'utf8'));
    anchorsByFile.set(path, anchors);
  }
  return anchors;
}

/** What is wrong with one link from `doc`, or undefined when it resolves. */
function linkProblem(doc: string, target: string): string | undefined {
  const hash = target.indexOf('#');
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = pathPart === '' ? join(REPO_ROOT, doc) : join(REPO_ROOT, dirname(doc), pathPart);
  if (!existsSync(file)) return `${relative(REPO_ROOT, file)} does not exist`;
  if (anchor === undefined) return undefined;
  if (!file.endsWith('.md')) return `#${anchor} points into ${relative(REPO_ROOT, file)}, which is not Markdown`;
  if (anchorsOf(file).has(anchor)) return undefined;
  return `${relative(REPO_ROOT, file)} has no heading with anchor #${anchor}`;
}

describe('docs: relative links and anchors', () => {
  describe('githubSlug', () => {
    it('lower-cases, keeps - and _, drops other punctuation and code markup', () => {
      expect(githubSlug('Start, stop and readiness of `serve`')).to.equal('start-stop-and-readiness-of-serve');
      expect(githubSlug('Minimum HAMi device-plugin version: v2.9.0')).to.equal(
        'minimum-hami-device-plugin-version-v290',
      );
      expect(githubSlug('NODELOCK_FORCE_AFTER and a frozen kubelet')).to.equal(
        'nodelock_force_after-and-a-frozen-kubelet',
      );
      expect(githubSlug("Switching: HAMi's chart turns its scheduler off")).to.equal(
        'switching-hamis-chart-turns-its-scheduler-off',
      );
    });

    it('numbers repeated headings as GitHub does, and ignores "headings" inside code blocks', () => {
      const anchors = headingAnchors('# A\n## Tests\n```sh\n# not a heading\n```\n## Tests\n');
      expect([...anchors]).to.deep.equal(['a', 'tests', 'tests-1']);
    });
  });

  for (const doc of documentationFiles()) {
    it(`${doc}: every relative link resolves`, () => {
      const problems = relativeLinks(readFileSync(join(REPO_ROOT, doc), 'utf8'))
        .map(({ line, target }) => ({ line, target, problem: linkProblem(doc, target) }))
        .filter(({ problem }) => problem !== undefined)
        .map(({ line, target, problem }) => `${doc}:${line}: (${target}): ${problem ?? ''}`);
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });
  }
});
