import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManagedProcess, processGroupExists } from '../../../src/local/managed-process.js';

async function within<T>(ms: number, promise: Promise<T>): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => {
      resolve('timeout');
    }, ms);
  });
  const result = await Promise.race([promise, timeout]);
  clearTimeout(timer);
  return result;
}

describe('ManagedProcess', function () {
  this.timeout(20_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'managed-process-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes the program output to its log and reports the last lines', async () => {
    const child = ManagedProcess.start({
      name: 'printer',
      command: 'bash',
      args: ['-c', 'for i in 1 2 3 4 5; do echo line-$i; done; exit 3'],
      logFile: join(dir, 'p.log'),
    });
    const exit = await child.exited;
    expect(exit.code).to.equal(3);
    expect(child.lastLogLines(2)).to.equal('line-4\nline-5');
  });

  it('stops the program with SIGTERM and leaves no process in its group', async () => {
    const child = ManagedProcess.start({
      name: 'sleeper',
      command: 'sleep',
      args: ['60'],
      logFile: join(dir, 's.log'),
    });
    expect(processGroupExists(child.pid)).to.equal(true);
    await child.stop(3000);
    expect(child.hasExited).to.equal(true);
    expect(processGroupExists(child.pid)).to.equal(false);
  });

  it('escalates to SIGKILL when the program ignores SIGTERM', async () => {
    const child = ManagedProcess.start({
      name: 'stubborn',
      command: 'bash',
      args: ['-c', "trap '' TERM; while true; do sleep 0.1; done"],
      logFile: join(dir, 't.log'),
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    await child.stop(500);
    expect(Date.now() - started).to.be.lessThan(5000);
    expect(processGroupExists(child.pid)).to.equal(false);
  });

  it('is stopped by its guard when the guarded process dies without cleaning up', async () => {
    const owner = spawn('sleep', ['60']);
    const child = ManagedProcess.start({
      name: 'orphan-to-be',
      command: 'sleep',
      args: ['60'],
      logFile: join(dir, 'o.log'),
      guardPid: owner.pid,
    });
    owner.kill('SIGKILL');
    const result = await within(8000, child.exited);
    expect(result).not.to.equal('timeout');
    expect(processGroupExists(child.pid)).to.equal(false);
    expect(child.lastLogLines()).to.include('is gone; stopping sleep');
  });

  it('kills synchronously for process exit handlers', async () => {
    const child = ManagedProcess.start({
      name: 'sleeper',
      command: 'sleep',
      args: ['60'],
      logFile: join(dir, 'k.log'),
    });
    child.killNow();
    const exit = await child.exited;
    expect(exit.signal).to.equal('SIGKILL');
  });
});
