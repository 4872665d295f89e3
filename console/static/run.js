// The run page (console/templates/run.html): draws the run's workflow as an SVG graph and keeps
// it, the totals and the stage table current. Each run stream event (SSE, same-origin
// EventSource with the session cookie) triggers a refetch of the page's detail JSON,
// throttled, since the detail carries every stage and the per-component counts the graph
// shows. Served from our origin so the page's Content-Security-Policy can forbid inline
// script. No build step, no dependencies.
(function () {
  'use strict';

  var page = document.getElementById('run-page');
  if (!page) return;
  var base = '/dashboard/runs/' + encodeURIComponent(page.getAttribute('data-run-id'));
  var SVG = 'http://www.w3.org/2000/svg';
  var NODE_W = 190, NODE_H = 66, PAD = 24;
  var TABLE_LIMIT = 500;
  var REFRESH_GAP_MS = 400; // at most one detail fetch per gap, however fast events come

  var nodes = {}; // component id -> {g, rect, counts, title}
  var drawn = false;
  var source = null;
  var ended = false;

  function terminal(status) { return status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED'; }

  function el(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setText(id, text) {
    var e = document.getElementById(id);
    if (e) e.textContent = text;
  }

  function fmtTime(iso) {
    if (!iso) return '';
    var d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  }

  function errorText(err) {
    if (err === null || err === undefined) return '';
    if (typeof err === 'object' && typeof err.message === 'string') {
      return (err.code ? err.code + ': ' : '') + err.message;
    }
    var s = typeof err === 'string' ? err : JSON.stringify(err);
    return s.length > 200 ? s.slice(0, 200) + '…' : s;
  }

  // layout returns each component's top-left corner: its canvas position from the definition,
  // or, when positions overlap (a definition written without positions has every component at
  // [0, 0]), columns by depth along the edges.
  function layout(components, edges) {
    var pos = {};
    var overlap = false;
    components.forEach(function (c, i) {
      var p = c.position || [0, 0];
      pos[c.id] = { x: +p[0] || 0, y: +p[1] || 0 };
      for (var j = 0; j < i && !overlap; j++) {
        var q = pos[components[j].id];
        if (Math.abs(q.x - pos[c.id].x) < NODE_W && Math.abs(q.y - pos[c.id].y) < NODE_H) overlap = true;
      }
    });
    if (!overlap) return pos;
    var depth = {};
    components.forEach(function (c) { depth[c.id] = 0; });
    // Longest path from a source; a definition is acyclic, the bound only guards bad data.
    for (var round = 0; round < components.length; round++) {
      var changed = false;
      edges.forEach(function (e) {
        if (e.from in depth && e.to in depth && depth[e.to] < depth[e.from] + 1) {
          depth[e.to] = depth[e.from] + 1;
          changed = true;
        }
      });
      if (!changed) break;
    }
    var rows = {};
    components.forEach(function (c) {
      var d = depth[c.id];
      rows[d] = (rows[d] || 0) + 1;
      pos[c.id] = { x: d * (NODE_W + 70), y: (rows[d] - 1) * (NODE_H + 40) };
    });
    return pos;
  }

  // border is where the line from the centre of a node towards (dx, dy) leaves its box.
  function border(cx, cy, dx, dy, gap) {
    var hw = NODE_W / 2 + gap, hh = NODE_H / 2 + gap;
    var t = Math.min(dx ? hw / Math.abs(dx) : Infinity, dy ? hh / Math.abs(dy) : Infinity);
    return { x: cx + dx * t, y: cy + dy * t };
  }

  function draw(detail) {
    var comps = detail.components || [];
    var edges = detail.edges || [];
    var pos = layout(comps, edges);
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    comps.forEach(function (c) {
      var p = pos[c.id];
      minX = Math.min(minX, p.x); minY = Math.min(minY, p.y);
      maxX = Math.max(maxX, p.x + NODE_W); maxY = Math.max(maxY, p.y + NODE_H);
    });
    if (!comps.length) { minX = minY = 0; maxX = NODE_W; maxY = NODE_H; }
    var w = maxX - minX + 2 * PAD, h = maxY - minY + 2 * PAD;
    // The viewBox translates and scales the canvas to fit; width and height are its natural
    // size, which CSS shrinks to the page's width.
    var svg = el('svg', { viewBox: (minX - PAD) + ' ' + (minY - PAD) + ' ' + w + ' ' + h, width: w, height: h, role: 'img',
      'aria-label': 'Workflow graph' });
    var defs = el('defs', {});
    var marker = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '9', refY: '5', markerWidth: '8', markerHeight: '8',
      orient: 'auto-start-reverse' });
    marker.appendChild(el('path', { d: 'M0,0 L10,5 L0,10 z', 'class': 'arrow' }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    edges.forEach(function (e) {
      var a = pos[e.from], b = pos[e.to];
      if (!a || !b) return;
      var ax = a.x + NODE_W / 2, ay = a.y + NODE_H / 2, bx = b.x + NODE_W / 2, by = b.y + NODE_H / 2;
      var s = border(ax, ay, bx - ax, by - ay, 0), t = border(bx, by, ax - bx, ay - by, 3);
      var line = el('path', { d: 'M' + s.x + ',' + s.y + ' L' + t.x + ',' + t.y, 'class': 'edge', 'marker-end': 'url(#arrow)',
        'data-from': e.from, 'data-to': e.to });
      svg.appendChild(line);
    });
    comps.forEach(function (c) {
      var p = pos[c.id];
      var g = el('g', { 'class': 'node', transform: 'translate(' + p.x + ',' + p.y + ')', 'data-component': c.id, tabindex: '0' });
      var title = el('title', {});
      var rect = el('rect', { width: NODE_W, height: NODE_H, rx: 10, ry: 10 });
      var name = el('text', { x: 12, y: 22 }, clip(c.name || c.id, 22));
      var module = el('text', { x: 12, y: 40, 'class': 'module' }, clip(c.module, 28));
      var counts = el('text', { x: 12, y: 57, 'class': 'counts' }, '');
      g.appendChild(title); g.appendChild(rect); g.appendChild(name); g.appendChild(module); g.appendChild(counts);
      svg.appendChild(g);
      nodes[c.id] = { g: g, counts: counts, title: title };
    });
    var box = document.getElementById('graph');
    box.textContent = '';
    box.appendChild(svg);
    drawn = true;
  }

  function clip(s, n) { s = String(s || ''); return s.length > n ? s.slice(0, n - 1) + '…' : s; }

  function countsText(c) {
    var n = c.counts || {};
    var parts = [];
    if (c.module === 'FOR_EACH') {
      if (c.iterations !== null && c.iterations !== undefined) {
        parts.push((c.iterationsDone || 0) + '/' + c.iterations + ' items done');
      }
      return parts.join('');
    }
    if (!c.forEach) return '';
    var known = c.iterations !== null && c.iterations !== undefined;
    if (!known && !(n.created || n.running || n.completed || n.failed)) return ''; // loop not reached yet
    var total = known ? '/' + c.iterations : '';
    parts.push((n.completed || 0) + total + ' done');
    if (n.running) parts.push(n.running + ' running');
    if (n.created) parts.push(n.created + ' queued');
    if (n.failed) parts.push(n.failed + ' failed');
    return parts.join(', ');
  }

  function renderNodes(detail) {
    (detail.components || []).forEach(function (c) {
      var n = nodes[c.id];
      if (!n) return;
      // A red rim marks real failures among a loop body's items, not stages a cancel stopped.
      var cls = 'node st-' + c.status + ((c.counts && c.counts.failed > (c.counts.canceled || 0)) ? ' has-failed' : '');
      n.g.setAttribute('class', cls);
      n.g.setAttribute('data-status', c.status);
      var text = countsText(c);
      n.counts.textContent = text;
      n.title.textContent = (c.name || c.id) + ' (' + c.module + '): ' + c.status.replace('_', ' ').toLowerCase() + (text ? ', ' + text : '');
    });
  }

  function setStatus(status) {
    var st = document.getElementById('run-status');
    st.textContent = status;
    st.setAttribute('data-status', status);
    st.setAttribute('class', 'status st-' + status);
  }

  function renderSummary(d) {
    setStatus(d.displayStatus || d.status);
    setText('pending', String(d.pendingStageCount));
    setText('failed', String(d.failedStageCount));
    setText('canceled', String(d.canceledStageCount || 0));
    document.getElementById('canceled-box').hidden = !d.canceledStageCount;
    document.getElementById('failed-box').hidden = !!d.canceledStageCount && !d.failedStageCount;
    setText('usage', String(d.totalUsage));
    if (d.duration) setText('duration', d.duration);
    var cancelBox = document.getElementById('cancel-box');
    if (d.cancelRequestedAt) {
      cancelBox.hidden = false;
      setText('cancel', fmtTime(d.cancelRequestedAt));
    }
    var err = document.getElementById('run-error');
    var text = d.errorText || errorText(d.error);
    if (text) {
      err.hidden = false;
      err.textContent = text;
    }
  }

  // stageLabel is a stage's status as the page says it: CANCELED for one the run's cancel
  // stopped (the API says FAILED), SKIPPED for one no taken edge reached (COMPLETED there).
  function stageLabel(s) {
    if (s.skipped) return 'SKIPPED';
    return s.status === 'FAILED' && s.error && s.error.code === 'canceled' ? 'CANCELED' : s.status;
  }

  // took is a finished stage's time from dispatch to its end, in words.
  function took(s) {
    if (s.status !== 'COMPLETED' && s.status !== 'FAILED') return '';
    if (!s.executionDispatchedAt || !s.updatedAt) return '';
    var ms = new Date(s.updatedAt) - new Date(s.executionDispatchedAt);
    if (isNaN(ms) || ms < 0) return '';
    if (ms < 1000) return ms + ' ms';
    var sec = ms / 1000;
    if (sec < 10) return (Math.floor(sec * 10) / 10).toString() + ' s';
    if (sec < 60) return Math.floor(sec) + ' s';
    if (sec < 3600) return Math.floor(sec / 60) + ' min ' + (Math.floor(sec) % 60) + ' s';
    return Math.floor(sec / 3600) + ' h ' + (Math.floor(sec / 60) % 60) + ' min';
  }

  function renderTable(d) {
    var stages = d.runStages || [];
    var body = document.querySelector('#stages tbody');
    var rows = document.createDocumentFragment();
    stages.slice(0, TABLE_LIMIT).forEach(function (s) {
      var tr = document.createElement('tr');
      tr.setAttribute('data-stage-id', s.id);
      var name = cell(tr, '', 'Stage');
      var link = document.createElement('a');
      link.className = 'stage-link';
      link.href = base + '/stages/' + encodeURIComponent(s.id);
      link.textContent = s.name || s.referenceId;
      name.appendChild(link);
      name.appendChild(document.createTextNode(' '));
      var code = document.createElement('code');
      code.textContent = s.referenceId;
      name.appendChild(code);
      if (s.childRunId) {
        name.appendChild(document.createTextNode(' '));
        var child = document.createElement('a');
        child.className = 'child-run';
        child.href = '/dashboard/runs/' + encodeURIComponent(s.childRunId);
        child.textContent = 'child run';
        name.appendChild(child);
      }
      var mc = document.createElement('code');
      mc.textContent = s.module;
      cell(tr, '', 'Module').appendChild(mc);
      cell(tr, s.iteration >= 0 ? String(s.iteration) : '', 'Item');
      var label = stageLabel(s);
      var badge = document.createElement('span');
      badge.className = 'status st-' + label;
      badge.textContent = label;
      cell(tr, '', 'Status').appendChild(badge);
      cell(tr, String(s.executionAttempt), 'Attempt');
      cell(tr, String(s.creditUsage), 'Credits');
      cell(tr, took(s), 'Took', 'nowrap');
      cell(tr, s.updatedAt ? fmtTime(s.updatedAt).slice(11, 19) : '', 'Updated');
      cell(tr, errorText(s.error), 'Error', 'err');
      rows.appendChild(tr);
    });
    body.textContent = '';
    body.appendChild(rows);
    var more = document.getElementById('stages-more');
    more.hidden = stages.length <= TABLE_LIMIT;
    more.textContent = stages.length > TABLE_LIMIT ? 'And ' + (stages.length - TABLE_LIMIT) + ' more stages; the graph counts them all.' : '';
  }

  // cell appends a labelled cell (the label heads it when the table collapses at phone width).
  function cell(tr, text, label, cls) {
    var td = document.createElement('td');
    if (cls) td.className = cls;
    td.setAttribute('data-label', label);
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function render(d) {
    if (!drawn) draw(d);
    renderNodes(d);
    renderSummary(d);
    renderTable(d);
    renderOutput(d);
    page.setAttribute('data-refreshed', String(Date.now()));
  }

  // renderOutput shows the run's output once it completed (null before).
  function renderOutput(d) {
    var box = document.getElementById('run-output-box');
    if (!box || d.status !== 'COMPLETED') return;
    setText('run-output', JSON.stringify(d.output, null, 2));
    box.hidden = false;
  }

  // Throttled refresh: one fetch in flight at a time, at most one per REFRESH_GAP_MS, and a
  // request made meanwhile is served by one more fetch afterwards, so the last event is always
  // followed by a fetch that sees it.
  var inFlight = false, again = false, last = 0, timer = null;
  function refresh() {
    if (inFlight) { again = true; return; }
    var wait = last + REFRESH_GAP_MS - Date.now();
    if (wait > 0) {
      if (!timer) timer = setTimeout(function () { timer = null; refresh(); }, wait);
      return;
    }
    inFlight = true;
    last = Date.now();
    fetch(base + '/detail', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (r) {
        if (r.status === 401) { location.reload(); throw new Error('signed out'); }
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.json();
      })
      .then(function (d) {
        render(d);
        if (terminal(d.status)) finish();
      })
      .catch(function () { setText('live', 'Could not refresh; retrying on the next update.'); })
      .then(function () {
        inFlight = false;
        if (again) { again = false; refresh(); }
      });
  }

  // finish stops following a run that ended, and takes away what only a running run offers.
  function finish() {
    ended = true;
    if (source) { source.close(); source = null; }
    setText('live', 'Finished');
    var cancel = document.getElementById('cancel-section');
    if (cancel) cancel.parentNode.removeChild(cancel);
    var label = document.querySelector('#duration');
    if (label && label.previousElementSibling) label.previousElementSibling.textContent = 'Took';
  }

  function connect() {
    if (!window.EventSource) { setText('live', 'This browser cannot follow the run live; reload to update.'); return; }
    source = new EventSource(base + '/stream');
    source.onopen = function () { if (!ended) setText('live', 'Live'); };
    source.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev && ev.status) {
        // A canceled run's terminal event says FAILED with cancelRequestedAt set (SPEC.md 2.6).
        setStatus(ev.status === 'FAILED' && ev.output && ev.output.cancelRequestedAt ? 'CANCELED' : ev.status);
      }
      // The server closes the stream after the terminal event; EventSource would reconnect.
      if (ev && terminal(ev.status) && source) { source.close(); source = null; }
      refresh();
    };
    source.onerror = function () {
      if (ended) return;
      if (source && source.readyState === EventSource.CLOSED) {
        setText('live', 'Live updates stopped; reload the page to resume.');
      } else {
        setText('live', 'Reconnecting…');
      }
    };
  }

  refresh();
  connect();
})();
