/* "Export incident" on an action and on a sentence: GET /v1/turns/{turn_id}/incident?target=a2|r3&format=
 * markdown, one Markdown file for an incident review (the target, the sources it could read with their
 * envelopes, ages and custody, its freshness findings). A plain link: the session cookie rides on it. */

import { h } from './dom.js';
import { enc } from './format.js';
import { labelNode } from './glossary.js';

export function incidentUrl(turnId, target) {
  return '/v1/turns/' + enc(turnId) + '/incident?target=' + enc(target) + '&format=markdown';
}

/** The link for `target` (a sentence's or an action's id) of the turn `turnId`. */
export function incidentLink(turnId, target, props) {
  return h('a', Object.assign({
    class: 'button incident-link', href: incidentUrl(turnId, target),
    download: 'incident-' + String(turnId).replace(/[^\w.-]/g, '_') + '-' + target + '.md', dataset: { target },
  }, props || {}), labelNode('incident.export', { capital: true }), h('span', { class: 'visually-hidden' }, ' ' + target));
}
