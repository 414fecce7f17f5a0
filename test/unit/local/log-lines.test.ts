import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { lineStream, logNoteText, tailLines } from '../../../src/local/log-lines.js';

describe('live view log lines', () => {
  it('turns a pino line into level, component and message; keeps other text', () => {
    expect(logNoteText('{"level":40,"component":"bind","msg":"lock wait"}')).to.equal('warn bind: lock wait');
    expect(logNoteText('{"level":50,"msg":"boom"}')).to.equal('error: boom');
    expect(logNoteText('not json')).to.equal('not json');
    expect(logNoteText('{"no":"msg"}')).to.equal('{"no":"msg"}');
  });

  it('hands on whole lines however the chunks are cut', async () => {
    const lines: string[] = [];
    const stream = lineStream((line) => {
      lines.push(line);
    });
    stream.write('one\ntw');
    stream.write('o\n\nthr');
    await new Promise<void>((done) => {
      stream.end('ee', done);
    });
    expect(lines).to.deep.equal(['one', 'two', 'three']);
  });

  it('reads only the end of a log: whole lines within the byte budget, none when it cannot be read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tail-'));
    try {
      const path = join(dir, 'kubelet.log');
      writeFileSync(path, 'first line\nsecond\nthird\n');
      expect(tailLines(path, 1024)).to.deep.equal(['first line', 'second', 'third']);
      // The last 16 bytes start inside "first line": that cut line is dropped.
      expect(tailLines(path, 16)).to.deep.equal(['second', 'third']);
      expect(tailLines(join(dir, 'missing.log'), 1024)).to.deep.equal([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
