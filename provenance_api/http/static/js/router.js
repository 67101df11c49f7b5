/* Shows the view for the address: sign-in when signed out, else the turn list, the trace list, or a turn. */

import { hideTip } from './dom.js';
import { loadGlossary } from './glossary.js';
import { parseRoute, rememberList, forgetControl } from './routes.js';
import { renderSignIn } from './session.js';
import { closeStream, state } from './state.js';
import { showTraces } from './traces.js';
import { showTurn } from './turn.js';
import { showTurns } from './turns.js';

function markNav(name) {
  for (const link of document.querySelectorAll('#site-nav a')) {
    if (link.dataset.route === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

export async function route() {
  const r = parseRoute();
  if (r === null) return;
  closeStream();
  hideTip();
  forgetControl();
  if (!state.session) {
    renderSignIn();
    return;
  }
  await loadGlossary();
  markNav(r.name === 'turn' ? null : r.name);
  if (r.name === 'turn') {
    await showTurn(r.turnId, r.traceId);
    return;
  }
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
  rememberList(location.hash || '#/');
  if (r.name === 'traces') await showTraces(r.params);
  else await showTurns(r.params);
}
