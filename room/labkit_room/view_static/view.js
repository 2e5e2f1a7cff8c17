// The room view's page: polls the board and draws it with text nodes only (nothing a learner could
// write is ever parsed as HTML here; the reports carry no text of theirs anyway).
"use strict";
(function () {
  const prefix = document.body.dataset.prefix;
  const status = document.getElementById("status");
  const head = document.querySelector("#board thead");
  const body = document.querySelector("#board tbody");
  const saved = document.getElementById("saved");

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function ago(seconds) {
    if (seconds === null || seconds === undefined) return "no verdict yet";
    if (seconds < 60) return seconds + " s ago";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
    return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min ago";
  }

  function cellText(cell) {
    if (cell.state === "solved") return "\u2713";
    if (cell.state === "hint") return "H" + cell.hint + (cell.tries ? " " + cell.tries + "\u00d7" : "");
    if (cell.state === "tried") return cell.tries + "\u00d7";
    return "\u00b7";
  }

  function cellTitle(ex, cell) {
    const parts = ["(" + ex.id + ")"];
    if (cell.state === "none") parts.push("not started");
    else {
      parts.push(cell.state === "solved" ? "solved" : "not solved yet");
      parts.push("tried " + cell.tries + " time" + (cell.tries === 1 ? "" : "s"));
      if (cell.hint) parts.push("hint " + cell.hint + " read");
      if (cell.over) parts.push("on it " + Math.floor(cell.on_for_s / 60) + " min, the agenda gives " + ex.minutes);
    }
    return parts.join(", ");
  }

  function draw(board) {
    const top = el("tr");
    top.appendChild(el("th", "learner"));
    for (const ex of board.exercises) {
      const th = el("th", "(" + ex.id + ")");
      th.appendChild(el("span", ex.notebook + ", " + ex.minutes + " min", "plan"));
      th.title = ex.title + " (notebook " + ex.notebook + ", " + ex.minutes + " min)";
      top.appendChild(th);
    }
    top.appendChild(el("th", "last verdict"));
    top.appendChild(el("th", "notebooks"));
    head.replaceChildren(top);
    const rows = [];
    let stuck = 0, solvedAll = 0;
    for (const row of board.rows) {
      const tr = el("tr");
      tr.dataset.learner = row.learner;
      tr.appendChild(el("th", row.learner));
      let over = false, done = 0;
      for (const ex of board.exercises) {
        const cell = row.cells[ex.id];
        const td = el("td", cellText(cell), "cell " + cell.state + (cell.over ? " over" : ""));
        td.dataset.exercise = ex.id;
        td.dataset.state = cell.state;
        td.title = cellTitle(ex, cell);
        over = over || cell.over;
        if (cell.state === "solved") done += 1;
        tr.appendChild(td);
      }
      if (over) stuck += 1;
      if (done === board.exercises.length) solvedAll += 1;
      tr.appendChild(el("td", ago(row.since_s), "since"));
      const link = el("a", "collect (zip)");
      link.href = prefix + "collect/" + encodeURIComponent(row.learner) + ".zip";
      link.setAttribute("download", "");
      const td = el("td");
      td.appendChild(link);
      tr.appendChild(td);
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    const items = [];
    for (const copy of board.saved) {
      const li = el("li");
      const link = el("a", copy.learner + " (room " + copy.room + ", closed " + copy.closed + ", " + copy.files + " files)");
      link.href = prefix + "saved/" + encodeURIComponent(copy.room) + "/" + encodeURIComponent(copy.learner) + ".zip";
      link.setAttribute("download", "");
      li.appendChild(link);
      items.push(li);
    }
    if (!items.length) items.push(el("li", "none yet: a room's close saves each learner's folder"));
    saved.replaceChildren(...items);
    status.textContent = board.rows.length + " learners; " + stuck + " over the agenda's time on an exercise; " +
      solvedAll + " solved everything; updated " + new Date().toLocaleTimeString();
    status.className = stuck ? "stuck" : "";
  }

  let every = 3000;
  async function poll() {
    try {
      const answer = await fetch(prefix + "api/board", {
        credentials: "same-origin", cache: "no-store", redirect: "error",
        headers: {"X-XSRFToken": document.body.dataset.xsrf}});
      if (!answer.ok) throw new Error(answer.status + " " + answer.statusText);
      const board = await answer.json();
      every = 1000 * (board.poll_s || 3);
      draw(board);
    } catch (err) {
      status.textContent = "the board could not be read (" + err.message + "); trying again";
      status.className = "stuck";
    }
    setTimeout(poll, every);
  }
  poll();
})();
