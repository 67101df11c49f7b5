/* Provenance viewer: plain JavaScript modules, no build step, no third-party code. Text from turns is only
 * ever inserted as text nodes. This module starts the page: dialogs, shortcuts, the session, the route.
 *
 *   dom, format, api, state, routes   helpers          markdown, md-blocks, md-inline   the response
 *   session                           sign-in          turns, traces, filters           the lists
 *   turn, segments, sources, evidence one turn         gate, progress, trace            a trace's run
 *   actions, action-view              its actions      (sentence → action → cause, and an action's result)
 *   result, chart, tree, probe        a result         calls, export                    calls, exports
 *   glossary, numbers, words          explanations     shortcuts, router                keys, views */

import { onUnauthorized } from './api.js';
import { byId, restoreFocus } from './dom.js';
import { wireCallsPanel } from './calls.js';
import { loadGlossary } from './glossary.js';
import { route } from './router.js';
import { loadSession, onSignedOut, signOut, whenSignedIn } from './session.js';
import { wireShortcuts } from './shortcuts.js';
import { viewerReturnTarget } from './sources.js';

function wireDialogs() {
  const viewer = byId('source-viewer');
  viewer.addEventListener('close', () => {
    restoreFocus(viewerReturnTarget());
  });
  for (const dialog of document.querySelectorAll('dialog')) {
    dialog.addEventListener('click', (ev) => { if (ev.target === dialog) dialog.close(); });
  }
  wireCallsPanel();
}

async function start() {
  onUnauthorized(onSignedOut);
  whenSignedIn(route);
  byId('sign-out').addEventListener('click', signOut);
  byId('skip-link').addEventListener('click', (ev) => { ev.preventDefault(); byId('main').focus(); });
  wireDialogs();
  wireShortcuts();
  window.addEventListener('hashchange', route);
  await Promise.all([loadSession(), loadGlossary()]);  // the labels are the glossary's: load it before the first view
  await route();
}

start();
