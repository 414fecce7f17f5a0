import { expect } from 'chai';
import {
  AlternateScreen,
  ENTER_ALTERNATE_SCREEN,
  LEAVE_ALTERNATE_SCREEN,
  type TerminalOutput,
} from '../../../src/local/terminal-screen.js';

class FakeTerminal implements TerminalOutput {
  written = '';
  columns: number | undefined = 40;
  rows: number | undefined = 5;
  readonly listeners = new Set<() => void>();
  write(text: string): void {
    this.written += text;
  }
  on(_event: 'resize', listener: () => void): void {
    this.listeners.add(listener);
  }
  off(_event: 'resize', listener: () => void): void {
    this.listeners.delete(listener);
  }
}

describe('alternate screen', () => {
  it('enters once, draws each row at its position after clearing it, and leaves once, restoring the cursor', () => {
    const terminal = new FakeTerminal();
    const screen = new AlternateScreen(terminal);
    screen.draw(['ignored before enter']);
    expect(terminal.written).to.equal('');
    let resized = 0;
    screen.enter(() => {
      resized++;
    });
    screen.enter(() => {
      resized += 100;
    });
    expect(terminal.written).to.equal(ENTER_ALTERNATE_SCREEN);
    expect(terminal.written).to.include('\u001b[?1049h').and.include('\u001b[?25l');
    terminal.written = '';
    screen.draw(['first', 'second']);
    expect(terminal.written).to.equal(
      '\u001b[?2026h\u001b[1;1H\u001b[2Kfirst\u001b[2;1H\u001b[2Ksecond\u001b[3;1H\u001b[J\u001b[?2026l',
    );
    for (const listener of terminal.listeners) listener();
    expect(resized).to.equal(1);
    terminal.written = '';
    screen.leave();
    screen.leave();
    expect(terminal.written).to.equal(LEAVE_ALTERNATE_SCREEN);
    expect(terminal.written).to.include('\u001b[?1049l').and.include('\u001b[?25h');
    expect(terminal.listeners.size).to.equal(0);
    expect(screen.isActive).to.equal(false);
  });

  it('does not erase below a frame that fills the screen (ED on the last row would erase it)', () => {
    const terminal = new FakeTerminal();
    const screen = new AlternateScreen(terminal);
    screen.enter(() => undefined);
    terminal.written = '';
    screen.draw(['1', '2', '3', '4', '5']);
    expect(terminal.written).to.not.include('\u001b[J');
  });

  it('assumes 80x24 when the terminal reports no size', () => {
    const terminal = new FakeTerminal();
    terminal.columns = undefined;
    terminal.rows = 0;
    expect(new AlternateScreen(terminal).size()).to.deep.equal({ columns: 80, rows: 24 });
  });
});
