import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { processGroupExists } from '../../src/local/managed-process.js';
import { spawnTsx, type CapturedProcess } from '../support/captured-process.js';
import { eventually, notYet } from '../support/test-cluster.js';

interface Started {
  processGroups: number[];
  runDir: string;
}

const fixture = resolve(import.meta.dirname, '..', 'support', 'fixtures', 'hold-control-plane.ts');

/** The fixture process; `started` is the first JSON line it prints (what it started, and where). */
function startFixture(): {
  child: CapturedProcess['child'];
  started: Promise<Started>;
  exited: CapturedProcess['exited'];
} {
  const fixtureProcess = spawnTsx(fixture);
  const { child, exited } = fixtureProcess;
  const started = new Promise<Started>((done, fail) => {
    // Registered after the capture's own listener, so stdout() already holds this chunk.
    child.stdout.on('data', () => {
      const line = fixtureProcess
        .stdout()
        .split('\n')
        .find((candidate) => candidate.startsWith('{'));
      if (line !== undefined) done(JSON.parse(line) as Started);
    });
    void exited.then(({ code }) => {
      fail(new Error(`fixture exited (${String(code)}) before starting: ${fixtureProcess.stderr()}`));
    });
  });
  return { child, started, exited };
}

/** Every live process whose command line mentions the run directory (etcd data dir, configs, certs). */
function processesUsing(runDir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmdline.includes(runDir)) found.push(`${entry}: ${cmdline.slice(0, 120)}`);
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

describe('control plane lifecycle: nothing is left behind', function () {
  this.timeout(180_000);

  it('stops etcd, kube-apiserver and kube-scheduler and removes its directory on Ctrl-C (SIGINT)', async () => {
    const { child, started, exited } = startFixture();
    const { processGroups, runDir } = await started;
    expect(processGroups).to.have.length(3);
    expect(processGroups.every(processGroupExists)).to.equal(true);
    expect(processesUsing(runDir)).to.have.length.greaterThan(0);

    child.kill('SIGINT');
    const exit = await exited;

    expect(exit.code).to.equal(130);
    expect(processGroups.filter(processGroupExists)).to.deep.equal([]);
    expect(processesUsing(runDir)).to.deep.equal([]);
    expect(existsSync(runDir)).to.equal(false);
  });

  it('stops everything even when the owning process is SIGKILLed and cannot clean up', async () => {
    const { child, started, exited } = startFixture();
    const { processGroups, runDir } = await started;

    child.kill('SIGKILL');
    await exited;

    // The guard around each program notices within about a second and stops it.
    await eventually(
      'the guards to stop every control-plane process',
      () => {
        const groups = processGroups.filter(processGroupExists);
        const processes = processesUsing(runDir);
        return Promise.resolve(
          groups.length > 0 || processes.length > 0
            ? notYet(
                `process groups alive: [${groups.join(', ')}]; ${processes.length} processes using the run directory${processes.length === 0 ? '' : `, e.g. ${processes[0]}`}`,
              )
            : true,
        );
      },
      30_000,
      250,
    );
    // Nobody was left to remove the directory; that is the one trace a SIGKILL leaves.
    rmSync(runDir, { recursive: true, force: true });
  });
});
