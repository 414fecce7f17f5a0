import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { expect } from 'chai';
import { ChaosBeside } from '../../soak/chaos-beside.js';
import { ProcessGroup, readLogTail } from '../../soak/process-group.js';
import type { ChaosResult } from '../../soak/step-outcome.js';

// A killed orphan stays a zombie until init reaps it (slowly in some containers): not alive.
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !['Z', 'X'].includes(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '');
  } catch {
    return false;
  }
}

function readLog(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

async function waitFor(condition: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await delay(20);
  }
}

// Real processes, but only sh and sleep for well under a second each: no cluster, no npm.
describe('soak: process groups and chaos beside (dummy commands)', function () {
  this.timeout(20_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'soak-group-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs stdout and stderr of a command and reports its exit', async () => {
    const logPath = join(dir, 'a.log');
    const exit = await new ProcessGroup('/bin/sh', ['-c', 'echo out; echo err >&2; exit 3'], { cwd: dir, logPath })
      .finished;
    expect(exit).to.include({ code: 3, signal: null, stoppedBySoak: false, strays: false });
    expect(readFileSync(logPath, 'utf8').split('\n').sort()).to.deep.equal(['', 'err', 'out']);
  });

  it('reads the tail of a log', () => {
    const logPath = join(dir, 'tail.log');
    writeFileSync(logPath, 'first\nsecond\n');
    expect(readLogTail(logPath, 7)).to.equal('second\n');
    expect(readLogTail(logPath)).to.equal('first\nsecond\n');
  });

  it('stops the whole group, grandchildren included, with SIGTERM', async () => {
    const logPath = join(dir, 'b.log');
    const group = new ProcessGroup('/bin/sh', ['-c', 'sleep 30 & echo $!; wait'], { cwd: dir, logPath });
    await waitFor(() => readFileSync(logPath, 'utf8').includes('\n'));
    const grandchild = Number(readFileSync(logPath, 'utf8').trim());
    expect(alive(grandchild)).to.equal(true);
    const exit = await group.stop();
    expect(exit.stoppedBySoak).to.equal(true);
    expect(exit.signal).to.equal('SIGTERM');
    expect(alive(grandchild)).to.equal(false);
  });

  it('sends SIGKILL when the group ignores SIGTERM for killAfterMs', async () => {
    const logPath = join(dir, 'c.log');
    // The ignored SIGTERM is inherited by sleep, so neither process ends on it.
    const group = new ProcessGroup('/bin/sh', ['-c', 'trap "" TERM; echo ready; sleep 30; echo survived'], {
      cwd: dir,
      logPath,
      killAfterMs: 300,
    });
    await waitFor(() => readFileSync(logPath, 'utf8').includes('ready'));
    const started = Date.now();
    const exit = await group.stop();
    expect(exit.signal).to.equal('SIGKILL');
    expect(Date.now() - started).to.be.within(250, 5_000);
    expect(readFileSync(logPath, 'utf8')).to.include('sending SIGKILL').and.not.include('survived');
  });

  it('stops processes a command left running after it exited', async () => {
    const logPath = join(dir, 'd.log');
    const exit = await new ProcessGroup('/bin/sh', ['-c', 'sleep 30 >/dev/null 2>&1 & echo $!'], {
      cwd: dir,
      logPath,
      stdioGraceMs: 200,
    }).finished;
    expect(exit).to.include({ code: 0, strays: true, stoppedBySoak: false });
    const stray = Number(readFileSync(logPath, 'utf8').split('\n')[0]);
    expect(alive(stray)).to.equal(false);
  });

  it('does not wait forever for pipes held open by a left-over process', async () => {
    const logPath = join(dir, 'e.log');
    const exit = await new ProcessGroup('/bin/sh', ['-c', 'sleep 30 & echo left'], {
      cwd: dir,
      logPath,
      stdioGraceMs: 200,
    }).finished;
    expect(exit).to.include({ code: 0, strays: true });
  });

  it('reports a command that cannot start as a failed exit with the reason in the log', async () => {
    const logPath = join(dir, 'f.log');
    const exit = await new ProcessGroup('/nonexistent/chaos', [], { cwd: dir, logPath }).finished;
    expect(exit).to.include({ code: null, signal: null });
    expect(readFileSync(logPath, 'utf8')).to.include('could not run the command').and.include('ENOENT');
  });

  it('chaos beside: runs seed after seed, records each exit and its last lines, and stops the running one', async () => {
    const ended: ChaosResult[] = [];
    // Seeds 1 and 2 end at once (2 with "violations"), seed 3 runs until the soak stops it.
    const chaos = new ChaosBeside({
      command: (seed) => ({
        file: '/bin/sh',
        args: [
          '-c',
          `echo "seed ${seed}"; if [ ${seed} -eq 2 ]; then echo "2 violation(s)"; exit 1; fi; if [ ${seed} -ge 3 ]; then exec sleep 30; fi`,
        ],
      }),
      firstSeed: 1,
      cwd: dir,
      logDir: dir,
      quickExitMs: 0,
      onRunEnd: (result) => {
        ended.push(result);
      },
    });
    chaos.start();
    await waitFor(() => ended.length === 2 && readLog(join(dir, 'chaos-seed-3.log')).includes('seed 3'));
    const results = await chaos.stop();
    expect(
      results.map((result) => [
        result.seed,
        result.exit.code,
        result.exit.signal,
        result.stoppedBySoak,
        result.lastLines.at(-1),
      ]),
    ).to.deep.equal([
      [1, 0, null, false, 'seed 1'],
      [2, 1, null, false, '2 violation(s)'],
      [3, null, 'SIGTERM', true, 'seed 3'],
    ]);
    expect(ended).to.have.length(3);
    expect(readFileSync(join(dir, 'chaos-seed-2.log'), 'utf8')).to.equal('seed 2\n2 violation(s)\n');
  });

  it('chaos beside: pauses before restarting a run that ended at once, and stop() cuts the pause short', async () => {
    const chaos = new ChaosBeside({
      command: () => ({ file: '/bin/sh', args: ['-c', 'exit 3'] }),
      firstSeed: 10,
      cwd: dir,
      logDir: dir,
      quickExitMs: 60_000,
      restartDelayMs: 60_000,
    });
    chaos.start();
    await delay(500);
    const started = Date.now();
    const results = await chaos.stop();
    expect(Date.now() - started).to.be.below(2_000);
    expect(results.map((result) => [result.seed, result.exit.code])).to.deep.equal([[10, 3]]);
  });
});
