/* Source kinds and layers in words, and their decorative icons (inline SVG). */

import { svg } from './dom.js';

const ICONS = {
  user_tool: ['M3 13 9 7', 'M8.5 3.5a3 3 0 0 0 4 4l-1.5 1.5-4-4z', 'M2.5 12.5l1 1'],
  mcp_tool: ['M5 2v3M11 2v3', 'M3.5 5h9v3a4.5 4.5 0 0 1-9 0z', 'M8 12.5V15'],
  artifact_read: ['M4 1.5h5l3 3v10H4z', 'M9 1.5v3h3', 'M6 8h4M6 10.5h4'],
  web_fetch: ['M8 1.5a6.5 6.5 0 1 0 0 13a6.5 6.5 0 1 0 0-13z', 'M1.5 8h13', 'M8 1.5c2 2 2 11 0 13M8 1.5c-2 2-2 11 0 13'],
  web_search: ['M7 2.5a4.5 4.5 0 1 0 0 9a4.5 4.5 0 1 0 0-9z', 'M10.3 10.3 14 14'],
  instructions: ['M3 2.5h10v11H3z', 'M5.5 5.5h5M5.5 8h5M5.5 10.5h3'],
  history: ['M2 3h12v7.5H7l-3 2.5v-2.5H2z'],
  tool_error: ['M8 1.5 15 14H1z', 'M8 6v4', 'M8 11.8v.4'],
};

const KIND_NAMES = {
  user_tool: 'tool call',
  mcp_tool: 'MCP tool',
  artifact_read: 'file read',
  web_fetch: 'web page',
  web_search: 'web search',
  instructions: 'agent instructions',
  history: 'earlier message',
  tool_error: 'failed tool call (its error text)',
};

export function kindIcon(kind) {
  const paths = ICONS[kind] || ICONS.user_tool;
  return svg('svg', { class: 'kind-icon', viewBox: '0 0 16 16', 'aria-hidden': 'true', focusable: 'false' },
    paths.map((d) => svg('path', { d })));
}

export function kindName(kind) {
  return KIND_NAMES[kind] || kind;
}

export const LAYER_NAMES = { tools: 'Tools', instructions: 'Instructions', history: 'History' };
