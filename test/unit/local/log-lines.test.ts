import { expect } from 'chai';
import { lineStream, logNoteText } from '../../../src/local/log-lines.js';

describe('live view log lines', () => {
  it('turns a pino line into level, component and message; keeps other text', () => {
    expect(logNoteText('{"level":40,"component":"bind","msg":"lock wait"}')).to.equal('warn bind: lock wait');
    expect(logNoteText('{"level":50,"msg":"boom"}')).to.equal('error: boom');
    expect(logNoteText('not json')).to.equal('not json');
    expect(logNoteText('{"no":"msg"}')).to.equal('{"no":"msg"}');
  });

  it('hands on whole lines however the chunks are cut', async () => {
    const lines: string[] = [];
    const stream = lineStream((line) => { lines.push(line); });
    stream.write('one\ntw');
    stream.write('o\n\nthr');
    await new Promise<void>((done) => { stream.end('ee', done); });
    expect(lines).to.deep.equal(['one', 'two', 'three']);
  });
});
