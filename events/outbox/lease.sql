-- $1 milliseconds: PostgreSQL ends the relay's session, rolling back its
-- claim, if the relay leaves its transaction idle that long (a hung
-- process, a host gone without closing the connection).
SELECT set_config('idle_in_transaction_session_timeout', $1, true)
