import json
import logging
import math
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock

from lavender import _phase, _sender, _wire
from lavender._phase import Phase

from .servers import Recorder, Silent, run_python


def ends(bodies):
    return [b for b in bodies if b["event"] == "end"]


class PhaseTest(unittest.TestCase):
    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)

    def phase(self, name="Pretrain 1/3", every=0.05, env=None, **kw):
        e = {"LAVENDER_URL": self.exporter.url}
        e.update(env or {})
        return Phase(name, every=every, env=e, **kw)

    def test_start_pings_and_end(self):
        with self.phase(total=40) as p:
            for step in range(1, 41):
                p.progress(step, 40, loss=2.0 / step)
                time.sleep(0.005)
        start, *pings, end = self.exporter.bodies
        self.assertEqual(start["event"], "start")
        self.assertEqual((start["step"], start["total"]), (0, 40), "a known total starts at step 0")
        self.assertEqual(start["pid"], os.getpid())
        with open("/proc/sys/kernel/random/boot_id") as f:
            self.assertEqual(start["boot_id"], f.read().strip())
        self.assertEqual(start["pid_ns"], os.readlink("/proc/self/ns/pid"))
        self.assertEqual(start["dirs"], [os.getcwd()])
        self.assertTrue(pings, "no ping while the loop ran")
        self.assertTrue(all(b["event"] == "ping" and b["total"] == 40 and "loss" in b for b in pings), pings)
        steps = [b["step"] for b in pings]
        self.assertEqual(steps, sorted(steps))
        self.assertEqual((end["event"], end["status"], end["step"], end["total"]), ("end", "ok", 40, 40))
        self.assertAlmostEqual(end["loss"], 2.0 / 40)
        self.assertTrue(all(path == "/api/v1/heartbeat" for path in self.exporter.paths))
        self.assertEqual(self.exporter.headers[0]["Content-Type"], "application/json")

    def test_step_zero_from_the_start_without_a_total(self):
        # The docs' plain loop passes its total to progress() only: a hang on
        # the first batch is still at step 0 since the start, and stalls.
        with self.phase(every=0.02):
            time.sleep(0.1)
        self.assertEqual((self.exporter.bodies[0]["event"], self.exporter.bodies[0].get("step")), ("start", 0))
        self.assertNotIn("total", self.exporter.bodies[0])
        self.assertTrue(all(b.get("step") == 0 for b in self.exporter.bodies), self.exporter.bodies)

    def test_no_step_zero_for_a_resumed_phase(self):
        p = self.phase(every=0.02)
        p.steps_from_zero = False
        with p:
            time.sleep(0.1)
        self.assertTrue(all("step" not in b for b in self.exporter.bodies), self.exporter.bodies)

    def test_progress_zero_is_sent_at_once(self):
        with self.phase(every=3600) as p:
            p.progress(0)
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("step") == 0 for b in bs if b["event"] == "ping")))

    def test_exception_ends_failed_with_reason(self):
        with self.assertRaises(ValueError):
            with self.phase() as p:
                p.progress(3, 10)
                raise ValueError("shape mismatch: [4, 8] vs [4, 9]\n  more text")
        (end,) = ends(self.exporter.bodies)
        self.assertEqual((end["status"], end["reason"], end["step"]), ("failed", "ValueError: shape mismatch: [4, 8] vs [4, 9] more text", 3))

    def test_keyboard_interrupt_and_exit(self):
        with self.assertRaises(KeyboardInterrupt):
            with self.phase():
                raise KeyboardInterrupt
        with self.assertRaises(SystemExit):
            with self.phase("Eval"):
                raise SystemExit(3)
        with self.assertRaises(SystemExit):
            with self.phase("Done"):
                raise SystemExit(0)
        got = [(b["phase"], b["status"], b.get("reason")) for b in ends(self.exporter.bodies)]
        self.assertEqual(got, [("Pretrain 1/3", "failed", "KeyboardInterrupt"),
                               ("Eval", "failed", "SystemExit: exit status 3"), ("Done", "ok", None)])

    def test_long_reason_is_cut(self):
        with self.assertRaises(RuntimeError):
            with self.phase():
                raise RuntimeError("x" * 500)
        reason = ends(self.exporter.bodies)[0]["reason"]
        self.assertEqual(len(reason), 200)
        self.assertTrue(reason.endswith("…"))

    def test_non_finite_loss(self):
        for loss, want in ((math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")):
            with self.subTest(loss=loss):
                self.exporter.bodies.clear()
                with self.phase() as p:
                    p.progress(1, 10, loss=loss)
                    self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("loss") == want for b in bs)))
                self.assertEqual(ends(self.exporter.bodies)[0]["loss"], want)

    def test_tensor_like_loss_is_detached_and_read_later(self):
        class Tensor:
            detached = 0

            def __init__(self, v):
                self.v = v

            def detach(self):
                Tensor.detached += 1
                return Tensor(self.v)

            def __float__(self):
                return self.v

        with self.phase() as p:
            p.progress(1, 2, loss=Tensor(0.25))
        self.assertEqual(Tensor.detached, 1)
        self.assertEqual(ends(self.exporter.bodies)[0]["loss"], 0.25)

    def test_eval_progress_and_dirs_and_save(self):
        out = tempfile.mkdtemp()
        ckpt = os.path.join(out, "checkpoint-5")
        os.makedirs(ckpt)
        with open(os.path.join(ckpt, "model.bin"), "wb") as f:
            f.write(b"\0" * 3000)
        with self.phase(dirs=[out]) as p:
            p.progress(5, 10)
            p.eval_progress(7, 20)
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("eval_step") == 7 for b in bs)))
            p.eval_end()
            p.saved(ckpt)
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("save_bytes") == 3000 for b in bs)))
        pings = [b for b in self.exporter.bodies if b["event"] == "ping"]
        self.assertEqual([b["eval_total"] for b in pings if "eval_step" in b][0], 20)
        self.assertEqual(sum(1 for b in pings if "save_bytes" in b), 1, "a save is reported once")
        self.assertEqual(self.exporter.bodies[0]["dirs"], [os.getcwd(), out])
        self.assertNotIn("eval_step", ends(self.exporter.bodies)[0])

    def test_busy_work_is_reported_while_it_moves(self):
        # Work between steps (compute_metrics) that runs Python or uses the
        # CPU is reported as busy; the same thread blocked (a hang) is not,
        # so the server's stall rule still sees a hang inside that work.
        with self.phase("Finetune", total=15) as p:
            p.progress(10, 15)
            p.busy("evaluating")
            n, until = 0, time.monotonic() + 0.5
            while time.monotonic() < until:
                n += sum(range(100))  # a metric computed in Python
            moving = [b.get("busy") for b in self.exporter.bodies if b["event"] == "ping" and b.get("step") == 10]
            self.exporter.bodies.clear()
            threading.Event().wait(0.8)  # a hung collective: blocked, no CPU
            hung = [b.get("busy") for b in self.exporter.bodies if b["event"] == "ping"]
            p.progress(11, 15)
        self.assertGreaterEqual(moving.count("evaluating"), 3, moving)
        # The first pings of the blocked stretch may still see the loop's
        # last moves (a stack, CPU time): the rest must not.
        self.assertGreaterEqual(len(hung), 6, hung)
        self.assertEqual(set(hung[3:]), {None}, "a blocked thread was reported busy: %s" % hung)
        self.assertNotIn("busy", self.exporter.bodies[-1], "the next step ends the busy stretch")

    def test_a_save_names_its_dir_last(self):
        # The server books a save on the filesystem of the last dir a ping
        # names: the directory the checkpoint went to, whichever it is.
        ckpt, logs, elsewhere = tempfile.mkdtemp(), tempfile.mkdtemp(), tempfile.mkdtemp()
        for d, n in ((ckpt, 100), (elsewhere, 200)):
            with open(os.path.join(d, "last.ckpt"), "wb") as f:
                f.write(b"\0" * n)
        with self.phase(dirs=[ckpt, logs]) as p:
            p.saved(os.path.join(ckpt, "last.ckpt"))
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("save_bytes") == 100 for b in bs)))
            p.saved(os.path.join(elsewhere, "last.ckpt"))
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("save_bytes") == 200 for b in bs)))
        saves = [(b["save_bytes"], b["dirs"]) for b in self.exporter.bodies if "save_bytes" in b]
        self.assertEqual(saves, [(100, [os.getcwd(), logs, ckpt]), (200, [os.getcwd(), logs, ckpt, elsewhere])])

    def test_saves_measured_between_two_pings_are_each_booked(self):
        # A fast loop saves twice before the sender's next ping, or just
        # before the end: each save reaches the server, in the order made.
        dirs = [tempfile.mkdtemp() for _ in range(4)]
        for i, d in enumerate(dirs):
            with open(os.path.join(d, "last.ckpt"), "wb") as f:
                f.write(b"\0" * (100 * (i + 1)))
        with self.phase(every=60, dirs=dirs) as p:
            with p._lock:  # the sender cannot take a save until both are in
                p._measure(os.path.join(dirs[0], "last.ckpt"), None)
                p._measure(os.path.join(dirs[1], "last.ckpt"), None)
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("save_bytes") == 200 for b in bs)))
            with p._lock:
                p._measure(os.path.join(dirs[2], "last.ckpt"), None)
                p._measure(os.path.join(dirs[3], "last.ckpt"), None)
        bodies = self.exporter.bodies
        saves = [(b["save_bytes"], b["dirs"][-1]) for b in bodies if "save_bytes" in b]
        self.assertEqual(saves, [(100 * (i + 1), d) for i, d in enumerate(dirs)])
        self.assertEqual(bodies[-1]["event"], "end")

    def test_saves_are_booked_in_the_order_made(self):
        # The second save is measured first (the first is a bigger tree):
        # the server still gets the first save first, as it takes the last
        # as the newest.
        first, second = tempfile.mkdtemp(), tempfile.mkdtemp()
        measure = _phase._size_of

        def slow_for_the_first(path):
            if path == first:
                time.sleep(0.3)
            return measure(path)

        with open(os.path.join(first, "a"), "wb") as f:
            f.write(b"\0" * 10)
        with open(os.path.join(second, "b"), "wb") as f:
            f.write(b"\0" * 20)
        with mock.patch.object(_phase, "_size_of", slow_for_the_first):
            with self.phase() as p:
                p.saved(first)
                p.saved(second)
                self.assertTrue(self.exporter.wait_for(lambda bs: sum("save_bytes" in b for b in bs) == 2))
        self.assertEqual([b["save_bytes"] for b in self.exporter.bodies if "save_bytes" in b], [10, 20])

    def test_inconsistent_progress_is_left_out(self):
        with self.phase() as p:
            p.progress(12, 10)  # a total below the step is not sent
            p.progress("twelve")
        end = ends(self.exporter.bodies)[0]
        self.assertNotIn("step", end)
        self.assertNotIn("total", end)

    def test_refused_progress_still_pings(self):
        self.exporter.status = lambda body: 400 if "step" in body and body["event"] == "ping" else 200
        with self.assertLogs("lavender", logging.WARNING) as logs:
            with self.phase() as p:
                p.progress(1)
                self.assertTrue(self.exporter.wait_for(lambda bs: any(b == {"phase": "Pretrain 1/3", "event": "ping"} for b in bs)))
        self.assertIn("HTTP 400: refused by the test", "\n".join(logs.output))

    def test_a_refused_field_costs_only_itself(self):
        # The server refuses a whole heartbeat for one field it will not
        # take, and names it: the heartbeat goes again without that field
        # (and those that go with it), so the pid, the step and the loss
        # still arrive, and the refusal is said once, not once a ping.
        for error, field, gone in [
            ('malformed JSON: invalid surrogate pair `\\udcdcbung"]` in string within "/dirs/0" after offset 153',
             "dirs", ("dirs",)),
            ('bad field: dirs: "/data/\\x01" has a control character', "dirs", ("dirs",)),
            ('malformed JSON: unknown field "busy"', "busy", ("busy",)),
            ("bad field: eval_step 7 is past the eval_total of 3", "eval_step", ("eval_step", "eval_total")),
            ("bad progress: step 11 is past the total of 10", "step", ("step", "total")),
        ]:
            with self.subTest(field):
                # An exporter of its own: a refusal is said once per exporter.
                self.exporter = Recorder(status=lambda body: (400, error) if field in body else 200)
                self.addCleanup(self.exporter.close)
                with self.assertLogs("lavender", logging.WARNING) as logs:
                    with self.phase("Refused " + field, total=10) as p:
                        p.progress(3, 10, loss=math.nan)
                        p.eval_progress(7, 3)
                        p.busy("evaluating")
                        self.assertTrue(self.exporter.wait_for(
                            lambda bs: sum(b["event"] == "ping" and field not in b for b in bs) >= 3))
                taken = [b for b in self.exporter.bodies if field not in b]
                start = [b for b in taken if b["event"] == "start"]
                if "dirs" in gone:
                    self.assertEqual(len(start), 1, self.exporter.bodies)
                    self.assertEqual(start[0]["pid"], os.getpid())
                pings = [b for b in taken if b["event"] == "ping"]
                self.assertTrue(pings)
                for b in pings:
                    self.assertFalse(set(gone) & set(b), b)
                    self.assertEqual(b["loss"], "NaN", b)
                    if "step" not in gone:
                        self.assertEqual(b["step"], 3, b)
                self.assertEqual([b["status"] for b in ends(taken)], ["ok"])
                said = [line for line in logs.output if "HTTP 400" in line]
                self.assertEqual(len(said), 1, logs.output)
                self.assertIn("without %s" % field, said[0])

    def test_a_refusal_that_names_no_field_is_said_once(self):
        self.exporter.status = lambda body: 400 if "step" in body and body["event"] == "ping" else 200
        with self.assertLogs("lavender", logging.WARNING) as logs:
            with self.phase() as p:
                p.progress(1)
                self.assertTrue(self.exporter.wait_for(
                    lambda bs: sum(b == {"phase": "Pretrain 1/3", "event": "ping"} for b in bs) >= 3))
        self.assertEqual(len(logs.output), 1, logs.output)

    @staticmethod
    def name_rule(body):
        """The server's rule for a phase name (phaseapi.NormalizePhaseName)."""
        name = body["phase"].strip()
        size = len(name.encode("utf-8", "surrogatepass"))
        if not name:
            return 400, "bad phase name: empty"
        if size > 64:
            return 400, "bad phase name: %d bytes, more than 64" % size
        for c in name:
            if not c.isprintable():
                return 400, "bad phase name: unprintable character U+%04X" % ord(c)
        return 200

    def test_a_name_the_api_refuses_loses_no_phase(self):
        # The server refuses every heartbeat of a name over 64 bytes or with
        # a character it cannot show: the whole phase, its failure included.
        self.exporter.status = self.name_rule
        long16 = "Finetune llama-2-7b-chat lr=2e-5 bs=64 warmup=500 seq=4096 lora r=16"
        long32 = "Finetune llama-2-7b-chat lr=2e-5 bs=64 warmup=500 seq=4096 lora r=32"
        wide = "Étape " + "日本語" * 20
        for name, want in [
            (long16, None), (long32, None), (long16, None),  # the same name twice: one phase, one warning
            (wide, None),
            ("Eval\tset\r\n1\x00", "Eval set 1"),
            ("\u200bZero\u202ewidth", "Zerowidth"),
            ("Split\ud800name", "Split\ufffdname"),
            ("  ", "unnamed"),
        ]:
            with self.assertRaises(RuntimeError):
                with self.phase(name, every=0.02) as p:
                    p.progress(1, 10)
                    time.sleep(0.05)
                    raise RuntimeError("CUDA out of memory")
            sent = self.exporter.bodies[-1]["phase"]
            self.assertEqual(self.exporter.bodies[-1]["reason"], "RuntimeError: CUDA out of memory")
            self.assertEqual(self.name_rule({"phase": sent}), 200, sent)
            self.assertEqual({b["phase"] for b in self.exporter.bodies if b["phase"] == sent or b["phase"] == name}, {sent})
            if want is not None:
                self.assertEqual(sent, want)
        names = []
        for b in self.exporter.bodies:
            if b["event"] == "start":
                names.append(b["phase"])
        self.assertEqual(len(names), 8)
        cut = names[:4]
        for n in cut:
            self.assertLessEqual(len(n.encode()), 64, n)
        self.assertTrue(cut[0].startswith("Finetune llama-2-7b-chat lr=2e-5 bs=64 warmup=500 seq="), cut[0])
        self.assertNotEqual(cut[0], cut[1], "names that differ past the cut must stay apart")
        self.assertEqual(cut[0], cut[2], "one name, one phase")
        self.assertTrue(cut[3].startswith("Étape 日本語"), cut[3])
        self.assertEqual([b["status"] for b in ends(self.exporter.bodies)], ["failed"] * 8)
        self.assertFalse([b for b in self.exporter.bodies if self.name_rule(b) != 200])

    def test_a_name_warning_is_said_once(self):
        name = "Sweep " + "x" * 70
        with self.assertLogs("lavender", logging.WARNING) as logs:
            for _ in range(3):
                with self.phase(name, every=0.02):
                    pass
        self.assertEqual(len(logs.output), 1, logs.output)
        self.assertIn("76 bytes, more than the 64", logs.output[0])

    def test_a_name_the_exporter_still_refuses_goes_as_ascii(self):
        # An exporter whose Unicode tables are older than Python's refuses a
        # character Python takes for printable: the phase still arrives.
        def old_tables(body):
            bad = [c for c in body["phase"] if ord(c) > 0x7e]
            return (400, "bad phase name: unprintable character U+%04X" % ord(bad[0])) if bad else 200

        self.exporter.status = old_tables
        with self.assertLogs("lavender", logging.WARNING) as logs:
            with self.assertRaises(ValueError):
                with self.phase("Ablation \U0001fae8 run", every=0.02) as p:
                    p.progress(2, 4)
                    self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("step") == 2 for b in bs if old_tables(b) == 200)))
                    raise ValueError("bad batch")
        taken = [b for b in self.exporter.bodies if old_tables(b) == 200]
        self.assertEqual({b["phase"] for b in taken}, {"Ablation ? run"})
        self.assertEqual([b["event"] for b in taken][0], "start")
        self.assertEqual([(b["status"], b["reason"]) for b in ends(taken)], [("failed", "ValueError: bad batch")])
        self.assertEqual(len([line for line in logs.output if "bad phase name" in line]), 1, logs.output)

    def test_wrapper_phase(self):
        env = {"LAVENDER_PHASE": "Finetune"}
        with self.phase("inner name", env=env) as p:
            p.progress(2, 4, loss=0.5)
            self.assertTrue(self.exporter.wait_for(lambda bs: any(b.get("step") == 2 for b in bs)))
        with self.assertRaises(RuntimeError):
            with self.phase("inner name", env=env):
                raise RuntimeError("CUDA out of memory")
        events = self.exporter.events()
        self.assertNotIn(("start", None), events, "the wrapper owns the start")
        self.assertNotIn(("end", "ok"), events, "the wrapper owns the ok end")
        self.assertEqual(events[-1], ("end", "failed"))
        self.assertTrue(all(b["phase"] == "Finetune" for b in self.exporter.bodies))
        self.assertEqual(self.exporter.bodies[-1]["reason"], "RuntimeError: CUDA out of memory")

    def test_other_ranks_report_only_failures(self):
        with self.phase(env={"RANK": "1"}) as p:
            p.progress(5, 10)
            time.sleep(0.15)
        self.assertEqual(self.exporter.bodies, [], "rank 1 reported a phase that went well")
        with self.assertRaises(RuntimeError):
            with self.phase(env={"SLURM_PROCID": "3"}):
                raise RuntimeError("NCCL error: unhandled system error")
        self.assertEqual(self.exporter.bodies, [{"phase": "Pretrain 1/3", "event": "end", "status": "failed",
                                                 "reason": "rank 3: RuntimeError: NCCL error: unhandled system error"}])

    def test_rank_from_the_process_group(self):
        # torch.multiprocessing.spawn sets no rank variable: the rank is
        # the process group's, read from the torch.distributed the program
        # imported (a stand-in here).
        import sys
        import types
        dist = types.ModuleType("torch.distributed")
        dist.is_available = lambda: True
        dist.is_initialized = lambda: True
        dist.get_rank = lambda: 1
        with mock.patch.dict(sys.modules, {"torch.distributed": dist}):
            with self.phase() as p:
                p.progress(5, 10)
                time.sleep(0.15)
            self.assertEqual(self.exporter.bodies, [], "rank 1 reported a phase that went well")
            with self.assertRaises(RuntimeError):
                with self.phase():
                    raise RuntimeError("NCCL error: unhandled system error")
            self.assertEqual(self.exporter.bodies, [{"phase": "Pretrain 1/3", "event": "end", "status": "failed",
                                                     "reason": "rank 1: RuntimeError: NCCL error: unhandled system error"}])
            # A launcher's rank comes first.
            self.exporter.bodies.clear()
            with self.phase(env={"RANK": "0"}):
                pass
            self.assertEqual([b["event"] for b in self.exporter.bodies], ["start", "end"])
            # No process group yet: rank 0, as before.
            self.exporter.bodies.clear()
            dist.is_initialized = lambda: False
            with self.phase():
                pass
            self.assertEqual([b["event"] for b in self.exporter.bodies], ["start", "end"])

    def test_bad_url_disables_reporting(self):
        with self.assertLogs("lavender", logging.WARNING) as logs:
            with Phase("P", every=0.05, env={"LAVENDER_URL": "ftp://host"}) as p:
                p.progress(1)
        self.assertIn("scheme must be http or https", logs.output[0])

    def test_every_must_be_positive(self):
        for every in (0, -1, "soon"):
            with self.assertRaises(ValueError):
                Phase("P", every=every)


class UnreachableTest(unittest.TestCase):
    """Against a hung exporter, a garbage-speaking port and a closed port,
    training runs at full speed, start and end cost at most seconds, and
    one line says what is wrong."""

    def run_against(self, url, saves=0):
        ckpt = tempfile.mkdtemp()
        with open(os.path.join(ckpt, "last.ckpt"), "wb") as f:
            f.write(b"\0" * 100)
        with self.assertLogs("lavender", logging.WARNING) as logs:
            t0 = time.monotonic()
            p = Phase("Pretrain 1/3", every=0.01, env={"LAVENDER_URL": url})
            p.start()
            started = time.monotonic() - t0
            loop = time.monotonic()
            for step in range(20000):
                p.progress(step, 20000, loss=0.5)
            loop = time.monotonic() - loop
            time.sleep(0.3)
            for _ in range(saves):
                p.saved(os.path.join(ckpt, "last.ckpt"))
            t1 = time.monotonic()
            p.end()
            ended = time.monotonic() - t1
        # The sender of an earlier test's exporter may still be finishing
        # its end when that exporter closes: its line is not this test's.
        address = url.split("://")[-1]
        return started, loop, ended, [line for line in logs.output if address in line]

    # The bounds say "never waited on the network": a start or a loop that
    # waited would take a request's timeout at least; they are no speed
    # targets (those are in bench/python).
    def test_hung_exporter(self):
        s = Silent()
        self.addCleanup(s.close)
        started, loop, ended, output = self.run_against(s.url)
        self.assertLess(started, _sender.REQUEST_TIMEOUT)
        self.assertLess(loop, _sender.REQUEST_TIMEOUT)
        self.assertLessEqual(ended, _sender.END_WAIT + 1)
        self.assertEqual(len(output), 1, output)
        self.assertIn("timed out", output[0])

    def test_hung_exporter_with_saves_at_the_end(self):
        # Checkpoints saved just before the end: their pings and the end
        # share the end's wait, so a hung exporter costs no more than
        # without them (and the sizes' moment).
        s = Silent()
        self.addCleanup(s.close)
        _, _, ended, output = self.run_against(s.url, saves=3)
        self.assertLessEqual(ended, _phase.SIZE_WAIT + _sender.END_WAIT + 0.5)
        self.assertEqual(len(output), 1, output)

    def test_garbage_answer(self):
        s = Silent(garbage=True)
        self.addCleanup(s.close)
        _, _, ended, output = self.run_against(s.url)
        self.assertLess(ended, _sender.END_WAIT + 1)
        self.assertEqual(len(output), 1, output)
        self.assertIn("BadStatusLine", output[0])

    def test_closed_port(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))  # a port nobody listens on
        self.addCleanup(sock.close)
        _, _, ended, output = self.run_against("127.0.0.1:%d" % sock.getsockname()[1])  # no scheme: http
        self.assertLess(ended, _sender.REQUEST_TIMEOUT)
        self.assertEqual(len(output), 1, output)
        self.assertIn("ConnectionRefusedError", output[0])


class DirsTest(unittest.TestCase):
    """A directory the heartbeat API cannot take (not UTF-8, a control
    character) is left out, said once; the rest of the heartbeat goes."""

    def test_a_working_directory_not_in_utf8(self):
        # The server's strict JSON decoder refuses a lone surrogate, which is
        # how Python holds a Latin-1 byte of a path ("\xdcbung", Übung).
        exporter = Recorder()
        self.addCleanup(exporter.close)

        def strict(body):
            try:
                json.dumps(body, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                return 400, 'malformed JSON: invalid surrogate pair in string within "/dirs/0" after offset 153'
            return 200

        exporter.status = strict
        top = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, top, True)
        out = os.path.join(top, "out")
        code = ("import os, time, lavender\n"
                "d = os.fsencode(%r) + b'/\\xdcbung'\n"
                "os.makedirs(d)\n"
                "os.chdir(d)\n"
                "for name in ('Latin1', 'Latin1 again'):\n"
                "    with lavender.phase(name, every=0.05, dirs=[%r]) as p:\n"
                "        p.progress(5, 10, loss=float('nan'))\n"
                "        time.sleep(0.3)\n") % (top, out)
        r = run_python(code, {"LAVENDER_URL": exporter.url})
        self.assertEqual(r.returncode, 0, r.stderr)
        bodies = [b for b in exporter.bodies if b["phase"] == "Latin1"]
        self.assertEqual(bodies[0]["event"], "start", exporter.bodies)
        self.assertIn("pid", bodies[0], "without the start's pid the server judges no process dead")
        self.assertEqual(bodies[0]["dirs"], [out])
        pings = [b for b in bodies if b["event"] == "ping"]
        self.assertTrue(pings)
        self.assertTrue(all(b["step"] == 5 and b["loss"] == "NaN" and b.get("dirs", [out]) == [out] for b in pings), pings)
        self.assertEqual([b["status"] for b in ends(exporter.bodies)], ["ok", "ok"])
        said = [line for line in r.stderr.splitlines() if "UTF-8" in line]
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn("/\\xdcbung' is not valid UTF-8", said[0], "the warning names the directory")
        self.assertNotIn("HTTP 400", r.stderr)

    def test_dirs_the_api_refuses(self):
        ok = "/data/ckpt"
        for bad in ("/tmp/\udcdcbung", "/tmp/line\nbreak", "/tmp/\x7f", "/tmp/\ufffd", "/" + "x" * 4096):
            with self.subTest(bad=bad[:20]):
                left_out = []
                self.assertEqual(_wire.absolute_dirs([bad, ok], left_out), [ok])
                self.assertEqual([d for d, _ in left_out], [bad])
        self.assertEqual(_wire.absolute_dirs(["/tmp/Übung", "/tmp/日本"]), ["/tmp/Übung", "/tmp/日本"])


class ResolverTest(unittest.TestCase):
    """The exporter's name is looked up off the training thread and kept:
    a slow resolver (a first nameserver down, 5 s a lookup) costs no
    heartbeat its wait, least of all the end."""

    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)

    def test_a_slow_resolver_loses_no_end(self):
        # The end waits END_WAIT for its heartbeat, then the process exits
        # and takes the daemon sender with it: a lookup per request ate it.
        code = ("import socket, time\n"
                "real, calls = socket.getaddrinfo, []\n"
                "def slow(*a, **k):\n"
                "    calls.append(a[0])\n"
                "    time.sleep(5)\n"
                "    return real(*a, **k)\n"
                "socket.getaddrinfo = slow\n"
                "import lavender\n"
                "t0 = time.monotonic()\n"
                "with lavender.phase('SlowDNS', every=60) as p:\n"
                "    started = time.monotonic() - t0\n"
                "    for step in range(1, 21):\n"
                "        p.progress(step, 20)\n"
                "        time.sleep(0.1)\n"
                "print('started in %.2fs, %d lookups' % (started, len(calls)))\n")
        port = self.exporter.server.server_address[1]
        r = run_python(code, {"LAVENDER_URL": "http://localhost:%d" % port})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.exporter.events()[0], ("start", None), self.exporter.bodies)
        self.assertEqual([(b["status"], b["step"]) for b in ends(self.exporter.bodies)], [("ok", 20)], r.stderr)
        started, lookups = r.stdout.split()[2], r.stdout.split()[3]
        self.assertLess(float(started.rstrip("s,")), 0.5, "the training thread waited on the lookup")
        self.assertEqual(lookups, "1", r.stdout)
        self.assertTrue(all(h["Host"] == "localhost:%d" % port for h in self.exporter.headers),
                        "the Host the exporter's write guard reads must stay the name")

    def test_a_failed_connection_looks_the_name_up_again(self):
        # The exporter moved (a new pod, a new lease): once no address it had
        # answers, the name is looked up again, off the sender's requests,
        # and at most every RESOLVE_AGAIN_AFTER seconds.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))  # a port nobody listens on
        self.addCleanup(closed.close)
        moved = [("127.0.0.1", closed.getsockname()[1]), self.exporter.server.server_address]
        calls = []

        def lookup(host, port, *args, **kwargs):
            calls.append(host)
            addr = moved[min(len(calls), len(moved)) - 1]
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", addr)]

        with mock.patch.object(_sender, "RESOLVE_AGAIN_AFTER", 0.3), mock.patch("socket.getaddrinfo", lookup):
            with self.assertLogs("lavender", logging.WARNING) as logs:
                with Phase("Moved", every=0.05, env={"LAVENDER_URL": "http://exporter.test:9877"}) as p:
                    p.progress(1, 10)
                    self.assertTrue(self.exporter.wait_for(lambda bs: any(b["event"] == "ping" for b in bs), timeout=5))
                    time.sleep(0.5)
        self.assertEqual(calls, ["exporter.test", "exporter.test"], "one lookup, then one after the failure")
        self.assertEqual(ends(self.exporter.bodies)[0]["status"], "ok")
        self.assertEqual(self.exporter.headers[0]["Host"], "exporter.test:9877")
        self.assertIn("ConnectionRefusedError", logs.output[0])


class ProcessTest(unittest.TestCase):
    """Failures that end the process: uncaught exceptions, SIGTERM, exits."""

    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        self.env = {"LAVENDER_URL": self.exporter.url + "/"}  # a trailing slash is fine

    def test_sigterm_with_default_handler_ends_phase_and_dies_by_sigterm(self):
        code = ("import lavender, os, signal, time\n"
                "with lavender.phase('Pretrain 1/3', every=0.05) as p:\n"
                "    p.progress(7, 100)\n"
                "    os.kill(os.getpid(), signal.SIGTERM)\n"
                "    time.sleep(5)\n")
        r = run_python(code, self.env)
        self.assertEqual(r.returncode, -signal.SIGTERM, r.stderr)
        end = ends(self.exporter.bodies)
        self.assertEqual([(b["status"], b["reason"], b["step"]) for b in end], [("failed", "SIGTERM", 7)])

    def test_sigterm_chains_the_users_handler(self):
        code = ("import lavender, os, signal, sys, time\n"
                "def stop(signum, frame):\n"
                "    print('checkpoint saved')\n"
                "    sys.exit(2)\n"
                "signal.signal(signal.SIGTERM, stop)\n"
                "with lavender.phase('Pretrain 1/3', every=0.05) as p:\n"
                "    os.kill(os.getpid(), signal.SIGTERM)\n"
                "    time.sleep(5)\n"
                "print('not reached')\n")
        r = run_python(code, self.env)
        self.assertEqual((r.returncode, r.stdout), (2, "checkpoint saved\n"), r.stderr)
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)], [("failed", "SIGTERM")])

    def test_sigterm_ignored_stays_ignored(self):
        code = ("import lavender, os, signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "with lavender.phase('Pretrain 1/3', every=0.05) as p:\n"
                "    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN\n"
                "    os.kill(os.getpid(), signal.SIGTERM)\n"
                "    p.progress(3, 3)\n"
                "print('went on')\n")
        r = run_python(code, self.env)
        self.assertEqual((r.returncode, r.stdout), (0, "went on\n"), r.stderr)
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)], [("ok", None)])

    def test_a_handler_set_later_that_chains_ours_owns_sigterm(self):
        # As Lightning's does: set after the phase starts, it calls the
        # handler it found and lets the run stop on its own terms. Ours then
        # stands for the default action, which such a handler never runs.
        code = ("import lavender, os, signal, sys, time\n"
                "with lavender.phase('Pretrain 1/3', every=0.05) as p:\n"
                "    found = signal.getsignal(signal.SIGTERM)\n"
                "    stop = []\n"
                "    def later(signum, frame):\n"
                "        stop.append(signum)\n"
                "        if callable(found):\n"
                "            found(signum, frame)\n"
                "    signal.signal(signal.SIGTERM, later)\n"
                "    for step in range(1, 100):\n"
                "        if step == 4:\n"
                "            os.kill(os.getpid(), signal.SIGTERM)\n"
                "        p.progress(step, 99)\n"
                "        if stop:\n"
                "            break\n"
                "print('stopped at', step)\n")
        r = run_python(code, self.env)
        self.assertEqual((r.returncode, r.stdout), (0, "stopped at 4\n"), r.stderr)
        self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(self.exporter.bodies)],
                         [("failed", "SIGTERM", 4)])

    def test_sigint_stops_as_without_lavender(self):
        loop = ("import os, signal, time\n"
                "def run(p):\n"
                "    for step in range(1, 100):\n"
                "        if step == 3:\n"
                "            os.kill(os.getpid(), signal.SIGINT)\n"
                "        p(step)\n")
        alone = run_python(loop + "run(lambda s: None)\n", self.env)
        watched = run_python(loop + "import lavender\n"
                             "with lavender.phase('Pretrain 1/3', every=0.05) as p:\n"
                             "    run(p.progress)\n", self.env)
        self.assertEqual(alone.returncode, -signal.SIGINT, alone.stderr)
        self.assertEqual(watched.returncode, alone.returncode, watched.stderr)
        self.assertEqual(watched.stderr.splitlines()[-1], "KeyboardInterrupt")
        self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(self.exporter.bodies)],
                         [("failed", "KeyboardInterrupt", 2)])

    def test_handlers_are_restored_after_the_phase(self):
        code = ("import lavender, signal, sys\n"
                "hook = sys.excepthook\n"
                "with lavender.phase('P'):\n"
                "    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL\n"
                "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
                "assert sys.excepthook is hook\n")
        r = run_python(code, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_uncaught_exception_outside_a_block(self):
        code = ("import lavender, sys\n"
                "sys.excepthook = lambda t, e, tb: print('user hook saw', t.__name__)\n"
                "p = lavender.Phase('Finetune', every=0.05)\n"
                "p.start()\n"
                "p.progress(3, 9)\n"
                "raise ValueError('bad max_steps')\n")
        r = run_python(code, self.env)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "user hook saw ValueError\n", "the user's excepthook was not chained")
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)],
                         [("failed", "ValueError: bad max_steps")])

    def test_failure_before_start(self):
        code = ("import lavender\n"
                "p = lavender.Phase('Finetune', every=0.05)\n"
                "p.arm()\n"
                "raise RuntimeError('accelerate prepare failed')\n")
        run_python(code, self.env)
        self.assertEqual(self.exporter.events(), [("end", "failed")], "a failure before training is still reported")

    def test_exit_while_running(self):
        code = ("import lavender, os\n"
                "p = lavender.Phase('Finetune', every=0.05)\n"
                "p.start()\n"
                "raise SystemExit(0)\n")
        run_python(code, self.env)
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)],
                         [("failed", "the process exited before the phase ended")])

    def test_failure_after_an_ok_end_fails_the_phase(self):
        # A save or a hub push after training, or a callback after ours,
        # raising once the phase ended ok: the phase failed after all.
        for name, tail, want in [
            ("uncaught after the block", "raise OSError(28, 'No space left on device')\n",
             [("ok", None), ("failed", "OSError: [Errno 28] No space left on device")]),
            ("told by fail()", "p.fail(RuntimeError('push_to_hub: 401'))\np.fail('again')\n",
             [("ok", None), ("failed", "RuntimeError: push_to_hub: 401")]),
            ("clean exit", "raise SystemExit(0)\n", [("ok", None)]),
            ("caught before exit", "try:\n    raise ValueError('x')\nexcept ValueError:\n    pass\n", [("ok", None)]),
            ("a later phase fails, not this one",
             "with lavender.phase('Eval', every=0.05):\n    pass\nraise ValueError('eval upload')\n",
             [("ok", None), ("ok", None), ("failed", "ValueError: eval upload")]),
        ]:
            with self.subTest(name):
                self.exporter.bodies.clear()
                code = ("import lavender\n"
                        "with lavender.phase('Finetune', every=0.05) as p:\n"
                        "    p.progress(3, 3)\n" + tail)
                run_python(code, self.env)
                got = [(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)]
                self.assertEqual(got, want)
                if len(want) == 3:
                    self.assertEqual(ends(self.exporter.bodies)[-1]["phase"], "Eval")

    def test_forked_child_reports_nothing(self):
        code = ("import lavender, os\n"
                "with lavender.phase('P', every=0.05) as p:\n"
                "    pid = os.fork()\n"
                "    if pid == 0:\n"
                "        p.fail('child')\n"
                "        os._exit(0)\n"
                "    os.waitpid(pid, 0)\n")
        r = run_python(code, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([b.get("status") for b in ends(self.exporter.bodies)], ["ok"])


if __name__ == "__main__":
    unittest.main()
