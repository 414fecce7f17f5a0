import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { loadKubeConfig } from '../../src/kube/client.js';
import { formatRfc3339 } from '../../src/lock/lock-value.js';
import { setLock } from '../support/lock-helpers.js';
import { eventually, notYet } from '../support/test-cluster.js';

const main = resolve(import.meta.dirname, '..', '..', 'src', 'main.ts');
const socket = `vgpu-warden-live-${process.pid}`;
const session = 'live';
const ROWS = 100;
const EVENTS = 230;

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { encoding: 'utf8' });
}

/** What the pane shows now: the alternate screen while the view runs, the normal screen after. */
const screen = (): string[] => tmux('capture-pane', '-p', '-t', session).replace(/\n$/, '').split('\n');
const paneFlag = (format: string): string => tmux('display-message', '-p', '-t', session, format).trim();
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const quote = (text: string) => `'${text.replace(/'/g, "'\\''")}'`;
/** A pane line for a wait's `seen`: shortened, and `(none)` past the screen's end. */
const paneLine = (line: string | undefined): string =>
  line === undefined ? '(none)' : JSON.stringify(line.trimEnd().slice(0, 120));
const lastPaneLine = (lines: string[]): string => paneLine(lines.findLast((line) => line.trim() !== ''));

/** Events named so that their key order is their time order: a LIST with limit 200 returns the oldest. */
async function createEvents(core: CoreV1Api, base: number): Promise<void> {
  const make = (index: number, name: string, time: Date, message: string) =>
    core.createNamespacedEvent({
      namespace: 'default',
      body: {
        metadata: { name, namespace: 'default' },
        involvedObject: { kind: 'Pod', namespace: 'default', name: 'live-e2e-subject', apiVersion: 'v1' },
        reason: 'LiveE2E',
        message,
        type: 'Normal',
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
        source: { component: 'live-e2e' },
      },
    });
  for (let start = 0; start < EVENTS; start += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, EVENTS - start) }, (_, offset) => {
        const index = start + offset;
        const padded = String(index).padStart(4, '0');
        return make(index, `live-e2e-${padded}`, new Date(base + index * 1000), `live-e2e event ${padded}`);
      }),
    );
  }
  // Five in one second, created one after another, named in the opposite order: shown in write order.
  const sameSecond = new Date(base + EVENTS * 1000);
  for (let index = 1; index <= 5; index++)
    await make(index, `live-e2e-same-${9 - index}`, sameSecond, `same-second ${index}`);
}

describe('vgpu-warden local live view in a terminal (tmux)', function () {
  this.timeout(240_000);
  let dir: string;
  let kubeConfig: ReturnType<typeof loadKubeConfig> | undefined;

  before(() => {
    try {
      execFileSync('tmux', ['-V']);
    } catch (error) {
      throw new Error('this test drives a real terminal through tmux: install it (e.g. apt-get install tmux)', {
        cause: error,
      });
    }
    dir = mkdtempSync(join(tmpdir(), 'vgpu-warden-live-view-'));
  });

  after(async () => {
    // Ctrl-C first, so the local cluster's processes are stopped by their own hooks, never orphaned.
    try {
      if (paneFlag('#{pane_dead}') !== '1') {
        tmux('send-keys', '-t', session, 'C-c');
        const deadline = Date.now() + 40_000;
        while (Date.now() < deadline && paneFlag('#{pane_dead}') !== '1') await sleep(250);
      }
      tmux('kill-server');
    } catch {
      // No server left: nothing to stop.
    }
    await kubeConfig?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the header on every redraw, shows the newest of >200 events in order, locks, pending pods, and restores the terminal', async () => {
    const kubeconfigPath = join(dir, 'kubeconfig');
    // No sweeps: the planted lock below must stay for the view to show its state.
    // tmux's own record of the exit status proved unreliable (now and then neither a status nor a
    // signal for a pane that died), so the command runs under a small parent that records how it
    // ended. The parent ignores the terminal's SIGINT (Ctrl-C signals the whole foreground group) and
    // exits as its child did.
    const statusFile = join(dir, 'exit-status');
    const recorder =
      "const{spawn}=require('node:child_process');process.on('SIGINT',()=>{});" +
      "const c=spawn(process.argv[1],process.argv.slice(2),{stdio:'inherit'});" +
      "c.on('exit',(code,signal)=>{require('node:fs').writeFileSync(process.env.STATUS_FILE,String(code??signal));process.exit(code??1);});";
    const command = [
      'env',
      'SWEEP_ENABLED=false',
      `STATUS_FILE=${statusFile}`,
      process.execPath,
      '-e',
      recorder,
      process.execPath,
      '--import',
      'tsx',
      main,
      'local',
      '--nodes',
      'simulated',
      '--gpu-nodes',
      '2',
      '--demo',
      'seed',
      '--kubeconfig-out',
      kubeconfigPath,
    ]
      .map(quote)
      .join(' ');
    // exec: tmux runs the command through sh, and Ctrl-C signals the whole foreground group; a shell
    // left waiting could die of that SIGINT first, and the pane would then report a signal, not 130.
    tmux('new-session', '-d', '-s', session, '-c', process.cwd(), '-x', '200', '-y', String(ROWS), `exec ${command}`);
    tmux('set-option', '-t', session, 'remain-on-exit', 'on');
    // The raw bytes the program writes: a dead pane reports no cursor state of its own.
    const rawLog = join(dir, 'pane.raw');
    tmux('pipe-pane', '-t', session, '-o', `cat >> ${quote(rawLog)}`);

    const exportLine = `export KUBECONFIG=${kubeconfigPath}`;
    // tmux tells of no change to a pane: these waits poll it.
    await eventually(
      'the live view on the alternate screen with the demo result',
      () => {
        if (paneFlag('#{pane_dead}') === '1') throw new Error(`local exited:\n${screen().join('\n')}`);
        const lines = screen();
        const alternate = paneFlag('#{alternate_on}') === '1';
        return Promise.resolve(
          alternate &&
            lines[1] === exportLine &&
            lines[2]?.startsWith(
              'seed demo (graceful delete): replacement pod seed-replacement-graceful bound to gpu-node-1',
            ) === true
            ? true
            : notYet(
                `alternate screen ${alternate ? 'on' : 'off'}; line 2 ${paneLine(lines[1])}; line 3 ${paneLine(lines[2])}; last line ${lastPaneLine(lines)}`,
              ),
        );
      },
      150_000,
      500,
    );

    kubeConfig = loadKubeConfig(kubeconfigPath);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    await createEvents(core, Date.now() - 300_000);
    await setLock(core, 'gpu-node-2', `${formatRfc3339(new Date())},default,live-e2e-ghost`);
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'live-e2e-too-big' },
        spec: {
          containers: [
            {
              name: 'cuda',
              image: 'nvidia/cuda:12.4.0-base',
              resources: { limits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '30000' } },
            },
          ],
        },
      },
    });

    const frame = await eventually(
      'a frame with the newest events, the lock state and the pending pod',
      () => {
        const lines = screen();
        const text = lines.join('\n');
        const parts = {
          'event 0229': text.includes('live-e2e event 0229'),
          'same-second 5': text.includes('same-second 5'),
          'the releasable lock': new RegExp(
            /gpu-node-2 {2}releasable {2}default\/live-e2e-ghost .* /.source +
              /owner-not-found: the pod named by the lock does not exist/.source,
          ).test(text),
          'the pending pod': /default\/live-e2e-too-big {2}\S+ {2}(FilteringFailed|FailedScheduling): /.test(text),
        };
        const missing = Object.entries(parts)
          .filter(([, present]) => !present)
          .map(([part]) => part);
        return Promise.resolve(
          missing.length === 0 ? lines : notYet(`a frame of ${lines.length} lines without ${missing.join(', ')}`),
        );
      },
      60_000,
      500,
    );
    const text = frame.join('\n');
    expect(frame[1]).to.equal(exportLine);
    expect(text).to.include('pending GPU pods (1):');
    // The newest events, in time order: the oldest ones (what `limit: 200` by key returned) are not.
    const shown = frame.flatMap((line) => /live-e2e event (\d{4})/.exec(line)?.[1] ?? []).map(Number);
    expect(shown.at(-1)).to.equal(EVENTS - 1);
    expect(shown).to.deep.equal([...shown].sort((a, b) => a - b));
    expect(shown).to.not.include(0);
    expect(frame.flatMap((line) => /same-second (\d)/.exec(line)?.[1] ?? [])).to.deep.equal(['1', '2', '3', '4', '5']);
    expect(frame).to.have.length.at.most(ROWS);

    // Later frames (one per second) still start with the header.
    await sleep(2500);
    const later = screen();
    expect(later[1]).to.equal(exportLine);
    expect(later[2]).to.match(
      /^seed demo \(graceful delete\): replacement pod seed-replacement-graceful bound to gpu-node-1/,
    );

    tmux('send-keys', '-t', session, 'C-c');
    await eventually(
      'local to exit',
      () =>
        Promise.resolve(
          paneFlag('#{pane_dead}') === '1'
            ? true
            : notYet(`the pane still alive, its last line ${lastPaneLine(screen())}`),
        ),
      60_000,
      250,
    );
    expect(paneFlag('#{alternate_on}'), 'still on the alternate screen').to.equal('0');
    const raw = readFileSync(rawLog, 'latin1');
    expect(raw.lastIndexOf('\u001b[?1049l'), 'never left the alternate screen')
      .to.be.greaterThan(raw.lastIndexOf('\u001b[?1049h'))
      .and.greaterThan(0);
    expect(raw.lastIndexOf('\u001b[?25h'), 'cursor left hidden').to.be.greaterThan(raw.lastIndexOf('\u001b[?25l'));
    const normal = screen().join('\n');
    // What was printed before the view is back, and what the view took meanwhile is printed after it.
    expect(normal).to.include(`local: ready; use it with: ${exportLine}`);
    expect(normal).to.include(
      'local: seed demo (force delete): replacement pod seed-replacement-force bound to gpu-node-1',
    );
    expect(normal).to.include(
      'local: seed demo (graceful delete): replacement pod seed-replacement-graceful bound to gpu-node-1',
    );
    expect(normal).to.include('local: received SIGINT; stopping');
    const status = await eventually(
      'the exit status',
      () => Promise.resolve(existsSync(statusFile) ? readFileSync(statusFile, 'utf8') : notYet(`no ${statusFile} yet`)),
      60_000,
      250,
    );
    expect(status, normal).to.equal('130');
  });
});
