// slm_magic's memory in JupyterLab: the "Memory" side-bar panel and the command
// "Remember this cell" (palette and a cell's context menu), over the server extension's API.
import { JupyterFrontEnd, JupyterFrontEndPlugin, ILayoutRestorer } from '@jupyterlab/application';
import { Dialog, ICommandPalette, Notification, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { IMemory, post, request } from './api';
import { MemoryPanel, short } from './panel';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<path class="jp-icon3" fill="#616161" d="M12 2a7 7 0 0 0-7 7c0 2.4 1.2 4.5 3 5.7V17a1 1 0 0 0 1 1h6a1 1 0 0 0 1-1v-2.3c1.8-1.2 3-3.3 3-5.7a7 7 0 0 0-7-7zm-3 18h6v1a1 1 0 0 1-1 1h-4a1 1 0 0 1-1-1v-1zm3-15.5a1 1 0 0 1 1 1V8h2.5a1 1 0 0 1 0 2H13v2.5a1 1 0 0 1-2 0V10H8.5a1 1 0 0 1 0-2H11V5.5a1 1 0 0 1 1-1z"/>
</svg>`;

export const memoryIcon = new LabIcon({ name: 'slm-magic:memory', svgstr: ICON_SVG });

const COMMANDS = {
  show: 'slm-magic:show-memory',
  remember: 'slm-magic:remember-cell',
  open: 'slm-magic:open-cell'
};

/** Open a notebook and make the cell a memory came from the active one, scrolled to. */
async function openCell(app: JupyterFrontEnd, path: string, cellId: string | null, cell: number | null): Promise<boolean> {
  let widget: NotebookPanel | undefined;
  try {
    // (a notebook renamed or deleted since: said in the memory's row, not in an error dialog)
    await app.serviceManager.contents.get(path, { content: false });
    widget = (await app.commands.execute('docmanager:open', { path })) as NotebookPanel;
  } catch {
    return false;
  }
  if (!widget || !(widget instanceof NotebookPanel)) {
    return !!widget;
  }
  await widget.context.ready;
  await widget.revealed;
  const notebook = widget.content;
  const cells = notebook.widgets;
  let index = cellId ? cells.findIndex(c => c.model.id === cellId) : -1;
  if (index < 0 && cell !== null) {
    index = cells.findIndex(c => c.model.type === 'code' && (c.model as any).executionCount === cell);
  }
  app.shell.activateById(widget.id);
  if (index < 0) {
    Notification.warning(`the cell is no longer in ${path}: opened the notebook`, { autoClose: 5000 });
    return true;
  }
  notebook.activeCellIndex = index;
  notebook.mode = 'command';
  await notebook.scrollToCell(cells[index], 'center');
  cells[index].node.focus();
  return true;
}

/** The form of "Remember this cell": the text, tags, type and a title. */
class RememberForm extends Widget {
  constructor(text: string, types: string[]) {
    super();
    this.addClass('slm-lab-remember');
    const label = (name: string, input: HTMLElement) => {
      const l = document.createElement('label');
      l.textContent = name;
      l.appendChild(input);
      this.node.appendChild(l);
    };
    this.text.value = text;
    this.text.rows = 6;  // (the share box stays in view at 700 px)
    this.text.className = 'slm-lab-remember-text';
    this.tags.placeholder = 'comma-separated, e.g. churn,decision';
    this.tags.className = 'slm-lab-remember-tags';
    this.title_.className = 'slm-lab-remember-title';
    this.type.className = 'slm-lab-remember-type';
    for (const t of types) {
      const o = document.createElement('option');
      o.value = o.textContent = t;
      this.type.appendChild(o);
    }
    this.type.value = types.includes('discovery') ? 'discovery' : types[0];
    label('What to remember', this.text);
    label('Tags', this.tags);
    label('Type', this.type);
    label('Title (optional)', this.title_);
    label('Project (optional)', this.project);
    this.project.className = 'slm-lab-remember-project';
    const share = document.createElement('label');
    share.className = 'slm-lab-remember-share-label';
    this.share.type = 'checkbox';
    this.share.className = 'slm-lab-remember-share';
    share.append(this.share, document.createTextNode(' share it with the team (everyone on this memory finds it)'));
    this.node.appendChild(share);
    this.text.addEventListener('input', () => this.acceptOnlyText());
  }

  /** "Remember" only with some text to remember: an empty one closed the dialog and lost the rest. */
  private acceptOnlyText(): void {
    const accept = this.node.closest('.jp-Dialog')?.querySelector<HTMLButtonElement>('.jp-mod-accept');
    if (accept) {
      accept.disabled = !this.text.value.trim();
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.acceptOnlyText();
  }

  project = document.createElement('input');
  share = document.createElement('input');

  text = document.createElement('textarea');
  tags = document.createElement('input');
  type = document.createElement('select');
  title_ = document.createElement('input');

  getValue() {
    return { content: this.text.value, tags: this.tags.value, type: this.type.value, title: this.title_.value,
             project: this.project.value, share: this.share.checked };
  }
}

async function rememberCell(app: JupyterFrontEnd, tracker: INotebookTracker, panel: MemoryPanel): Promise<void> {
  const widget = tracker.currentWidget;
  const cell = widget?.content.activeCell;
  if (!widget || !cell) {
    Notification.warning('select a cell of a notebook first');
    return;
  }
  const model = cell.model;
  const source = model.sharedModel.getSource();
  // the code: a code cell's own; for a markdown finding, the code cell above it (as %%remember
  // keeps the cell run before it)
  let code: string | null = null;
  if (model.type === 'code') {
    code = source;
  } else {
    const cells = widget.content.widgets;
    for (let i = cells.indexOf(cell) - 1; i >= 0; i--) {
      if (cells[i].model.type === 'code') {
        code = cells[i].model.sharedModel.getSource();
        break;
      }
    }
  }
  let types = ['discovery', 'decision', 'preference', 'pattern', 'profile'];
  try {
    types = (await request<{ types: string[] }>('facets')).types;
  } catch {
    // (the list above)
  }
  const form = new RememberForm(source, types);
  const count = model.type === 'code' ? (model as any).executionCount : null;
  const name = widget.context.path.split('/').pop();
  const result = await showDialog({
    // (which notebook and cell: from the palette, the notebook may not be the tab in view)
    title: `Remember this cell of ${name}${typeof count === 'number' ? ` [${count}]` : ''}`,
    body: form,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Remember' })],
    focusNodeSelector: '.slm-lab-remember-tags'
  });
  if (!result.button.accept || !result.value) {
    return;
  }
  try {
    const fact = await post<IMemory>('memories', {
      ...result.value,
      notebook: widget.context.path,
      cell_id: model.id,
      cell: typeof count === 'number' ? count : null,
      code: code && code.trim() ? code : null
    });
    Notification.success(`remembered ${fact.fact_id.slice(0, 8)}: ${short(fact.content, 60)}`, { autoClose: 4000 });
    await panel.reload(true);
  } catch (e) {
    Notification.error(`not remembered: ${(e as Error).message}`, { autoClose: 8000 });
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'slm-magic-lab:plugin',
  description: 'slm_magic’s memory in the side bar: browse, search and act on every memory.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null,
             restorer: ILayoutRestorer | null) => {
    const panel = new MemoryPanel({ openCell: (path, cellId, cell) => openCell(app, path, cellId, cell) });
    panel.title.icon = memoryIcon;
    app.shell.add(panel, 'left', { rank: 650 });
    if (restorer) {
      restorer.add(panel, 'slm-magic-memory');
    }

    app.commands.addCommand(COMMANDS.show, {
      label: 'Show the Memory panel',
      caption: 'slm_magic’s memory in the side bar',
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(COMMANDS.remember, {
      label: 'Remember this cell',
      caption: 'Keep the active cell’s text in the memory, with where it came from (no kernel needed)',
      icon: memoryIcon,
      isEnabled: () => !!tracker.currentWidget?.content.activeCell,
      execute: () => rememberCell(app, tracker, panel)
    });
    app.commands.addCommand(COMMANDS.open, {
      label: 'Open a memory’s cell',
      execute: args => openCell(app, String(args.path), (args.cell_id as string) || null,
        typeof args.cell === 'number' ? args.cell : null)
    });
    if (palette) {
      palette.addItem({ command: COMMANDS.remember, category: 'Memory' });
      palette.addItem({ command: COMMANDS.show, category: 'Memory' });
    }
    app.contextMenu.addItem({ command: COMMANDS.remember, selector: '.jp-Notebook .jp-Cell', rank: 12 });
  }
};

export default plugin;
