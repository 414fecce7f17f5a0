import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseRfc3339 } from '../../../src/lock/lock-value.js';

/**
 * Our lock-stamp parser against Go's own time.Parse(time.RFC3339, …), the call HAMi makes. The
 * fixture holds Go's verdicts on 1,521 strings: valid stamps (edge years, one-digit hours,
 * fractions of any length, offsets up to ±24:60) and seeded mutations of them. Regenerate with
 *   npx tsx -e "import('./test/support/lock-fuzz.ts').then((m) => \
 *     process.stdout.write(JSON.stringify(m.rfc3339Candidates(20261213, 1500))))" \
 *     | go run tools/rfc3339-verdicts/main.go > test/unit/lock/fixtures/go-rfc3339-verdicts.json
 */
interface Verdict {
  text: string;
  ok: boolean;
  unixMilli?: number;
}

const verdicts = JSON.parse(
  readFileSync(join(import.meta.dirname, 'fixtures', 'go-rfc3339-verdicts.json'), 'utf8'),
) as Verdict[];

describe("lock stamps: parseRfc3339 agrees with Go's time.Parse(time.RFC3339)", () => {
  it('the fixture has accepted and refused strings in numbers', () => {
    expect(verdicts.filter((verdict) => verdict.ok).length).to.be.above(300);
    expect(verdicts.filter((verdict) => !verdict.ok).length).to.be.above(300);
  });

  it('accepts exactly what Go accepts, at the same instant (to the millisecond)', () => {
    const disagreements: string[] = [];
    for (const { text, ok, unixMilli } of verdicts) {
      const parsed = parseRfc3339(text);
      const ours = typeof parsed === 'string' ? undefined : parsed.getTime();
      if (ok !== (ours !== undefined) || (ok && ours !== unixMilli))
        disagreements.push(
          `${JSON.stringify(text)}: Go ${ok ? unixMilli : 'refuses'}, ours ${ours ?? (parsed as string)}`,
        );
    }
    expect(disagreements).to.deep.equal([]);
  });
});
