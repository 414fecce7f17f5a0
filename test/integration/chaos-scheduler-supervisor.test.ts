import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { SchedulerSupervisor } from '../chaos/scheduler-supervisor.js';
import { eventually, notYet, sharedControlPlane } from '../support/test-cluster.js';

// The chaos runner's kube-scheduler, restarted as its Deployment would be when it exits on its own.
describe('chaos SchedulerSupervisor (real kube-scheduler)', function () {
  this.timeout(60_000);
  let logDir = '';
  beforeEach(() => {
    logDir = mkdtempSync(join(tmpdir(), 'scheduler-supervisor-'));
  });
  afterEach(() => {
    rmSync(logDir, { recursive: true, force: true });
  });

  it('restarts kube-scheduler after it exits on its own, keeping the exit and its log; stop() ends it for good', async () => {
    const lines: string[] = [];
    const supervisor = await SchedulerSupervisor.start(
      sharedControlPlane(),
      { profiles: [{ schedulerName: 'supervised-scheduler' }] },
      { logDir, log: (line) => lines.push(line), restartDelayMs: 100 },
    );
    try {
      const first = supervisor.handle?.process;
      expect(first).to.not.equal(undefined);
      process.kill(first?.pid ?? 0, 'SIGKILL');
      // The handle changes only once the new kube-scheduler answers /healthz (startScheduler waits for it).
      const second = await eventually('a second kube-scheduler', () => {
        const now = supervisor.handle?.process;
        return Promise.resolve(now !== undefined && now !== first ? now : notYet(`exits: ${supervisor.exits.length}`));
      });
      expect(supervisor.exits).to.have.length(1);
      expect(supervisor.exits[0]?.signal).to.equal('SIGKILL');
      expect(readFileSync(supervisor.exits[0]?.log ?? '', 'utf8')).to.include('kube-scheduler');
      expect(lines.join('\n')).to.include('restarting it as its Deployment would');
      await supervisor.stop();
      await second.exited;
      expect(supervisor.exits, 'a stop is not an exit of its own').to.have.length(1);
    } finally {
      await supervisor.stop();
    }
  });
});
