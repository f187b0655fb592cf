"""Elections: one leader at a time, terms that grow."""

from __future__ import annotations

import os
import tempfile

from tests import support
from tests.support import turnstile


class ElectionTest(support.ServiceCase):
    def test_one_leader_at_a_time_over_three_terms(self) -> None:
        name = support.key("election")
        with tempfile.TemporaryDirectory() as d:
            ws = [self.worker("campaign", support.env("TURNSTILE_TEST_URL"), name, "candidate-%d" % i, d)
                  for i in range(3)]
            lines = [support.read_line(w, 120) for w in ws]
            for w in ws:
                self.assertEqual(w.wait(60), 0, "a candidate failed (two leaders at once?)")
            self.assertFalse(os.path.exists(os.path.join(d, "leader")))
            with open(os.path.join(d, "terms")) as f:
                in_order = [int(x) for x in f]
        terms = []
        for line in lines:
            f = line.split()  # leader VALUE term N sees VALUE term N
            self.assertEqual(f[1], f[5], "while %s led, Leader said %s" % (f[1], f[5]))
            self.assertEqual(f[3], f[7])
            terms.append(int(f[3]))
        self.assertEqual(sorted({line.split()[1] for line in lines}), ["candidate-0", "candidate-1", "candidate-2"])
        self.assertEqual(sorted(terms), sorted(in_order))
        self.assertEqual(in_order, sorted(set(in_order)), "terms not strictly increasing: %s" % in_order)
        self.assertFalse(self.c.election(name).leader().elected)

    def test_campaign_in_process(self) -> None:
        e = self.c.election(support.key("inproc"))
        self.assertFalse(e.leader().elected)
        with e.campaign(value="me", ttl=5, wait=5) as lead:
            self.assertIsInstance(lead, turnstile.Leadership)
            self.assertEqual(lead.value, "me")
            now = e.leader()
            self.assertEqual((now.elected, now.value, now.term), (True, "me", lead.term))
            with self.assertRaises(turnstile.NotAcquired):
                e.campaign(value="other", ttl=5, wait=0.3)
            seen = e.observe()
            self.assertEqual(next(seen).value, "me")
            seen.close()
        self.assertFalse(e.leader().elected)
