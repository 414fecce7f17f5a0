import { expect } from 'chai';
import { LiveView, liveViewOffReason } from '../../../src/local/live-view-runner.js';
import { AlternateScreen, LEAVE_ALTERNATE_SCREEN, type TerminalOutput } from '../../../src/local/terminal-screen.js';

class FakeTerminal implements TerminalOutput {
  written = '';
  columns = 100;
  rows = 30;
  write(text: string): void {
    this.written += text;
  }
  on(): void {
    /* no resizes here */
  }
  off(): void {
    /* no resizes here */
  }
}

function setup(nodes: () => never[] = () => []) {
  const terminal = new FakeTerminal();
  const ticks: (() => void)[] = [];
  let cleared = 0;
  const view = new LiveView({
    screen: new AlternateScreen(terminal),
    kubeconfigExport: 'export KUBECONFIG=/tmp/k',
    sources: { nodes, pending: () => [], events: () => [] },
    clock: () => new Date('2026-12-01T10:00:00Z'),
    timers: {
      setInterval: (run) => {
        ticks.push(run);
        return 1;
      },
      clearInterval: () => {
        cleared++;
      },
    },
  });
  return { terminal, ticks, view, cleared: () => cleared };
}

describe('live view runner', () => {
  it('says why the view is off: --no-view, a pipe, a dumb terminal; on otherwise', () => {
    expect(liveViewOffReason({ noViewFlag: true, stdoutIsTTY: true, term: 'xterm' })).to.equal('--no-view was given');
    expect(liveViewOffReason({ noViewFlag: false, stdoutIsTTY: false, term: 'xterm' })).to.match(/not a terminal/);
    expect(liveViewOffReason({ noViewFlag: false, stdoutIsTTY: true, term: 'dumb' })).to.match(/TERM=dumb/);
    expect(liveViewOffReason({ noViewFlag: false, stdoutIsTTY: true, term: undefined })).to.equal(undefined);
  });

  it('draws at once and on every tick, with the export line on each frame', () => {
    const { terminal, ticks, view } = setup();
    view.start();
    expect(terminal.written).to.include('export KUBECONFIG=/tmp/k');
    terminal.written = '';
    ticks[0]?.();
    expect(terminal.written).to.include('export KUBECONFIG=/tmp/k').and.include('10:00:00 UTC');
  });

  it('shows notes and the demo line in the frame while active, and hands them back in order on stop', () => {
    const { terminal, view, cleared } = setup();
    view.note('before start: not taken');
    view.start();
    view.note('local: press Ctrl-C');
    view.setDemo('seed demo: bound after 300 ms', 'local: seed demo: bound after 300 ms');
    expect(terminal.written).to.include('local: press Ctrl-C').and.include('seed demo: bound after 300 ms');
    terminal.written = '';
    expect(view.stop()).to.deep.equal(['local: press Ctrl-C', 'local: seed demo: bound after 300 ms']);
    expect(terminal.written).to.equal(LEAVE_ALTERNATE_SCREEN);
    expect(cleared()).to.equal(1);
    expect(view.stop()).to.deep.equal([]);
    expect(view.isActive).to.equal(false);
  });

  it('survives a frame that cannot be drawn and says why on the next one', () => {
    let fail = true;
    const { terminal, ticks, view } = setup(() => {
      if (fail) throw new Error('store gone');
      return [];
    });
    view.start();
    fail = false;
    ticks[0]?.();
    expect(terminal.written).to.include('live view: could not draw a frame: store gone');
  });
});
